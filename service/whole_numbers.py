"""The one reading of a whole number a person typed, for the command line and the
server's settings alike (design section 6).

ASCII digits only, with an optional minus and surrounding white space: ``int()``
also takes ``"5_0051"``, ``"+50051"`` and full-width digits, which nothing else
reading these values (gRPC's target parser, a probe, another tool given the same
seed) would, so the same text must never be one number here and an error there.
"""

from __future__ import annotations

import re

_WHOLE_NUMBER = re.compile(r"\s*-?[0-9]+\s*", re.ASCII)
#: More digits than any value read here takes (a seed, the largest, has 20), so many
#: fewer than ``int()`` refuses (4,300) that a longer number is never converted.
MAX_DIGITS = 30
#: How much of a longer number a refusal quotes.
SHOWN_DIGITS = 20


class NumberTooLongError(ValueError):
    """A whole number of more than ``MAX_DIGITS`` digits (leading zeros aside): out of
    every range. ``shown`` is the number cut short for a refusal, with its length."""

    def __init__(self, text: str, digits: int) -> None:
        number = text.strip()
        self.shown = f"{number[:SHOWN_DIGITS]}... ({digits} digits)"
        super().__init__(f"out of range: {self.shown}")


def parse_whole_number(text: str) -> int:
    """``text`` as an int, or ``ValueError`` for anything but ASCII digits (see above):
    ``NumberTooLongError`` for more than ``MAX_DIGITS`` digits, which no range takes,
    never read whole (``int()`` of 4,301 digits or more raised a ValueError of its own,
    and a refusal quoted every digit)."""
    if not _WHOLE_NUMBER.fullmatch(text):
        raise ValueError(f"not a whole number: {text!r}")
    if (digits := len(text.strip().lstrip("-").lstrip("0"))) > MAX_DIGITS:
        raise NumberTooLongError(text, digits)
    return int(text)
