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


class NumberTooLongError(ValueError):
    """A whole number of more than ``MAX_DIGITS`` digits (leading zeros aside): out of
    every range. ``shown`` says so for a refusal by its sign and length alone: its
    digits could be a state key of digits given to the wrong setting (design section 4),
    and ``config.hide_keys`` does not recognise a cut-short one, which it knows by
    letters of both cases beside digits."""

    def __init__(self, negative: bool, digits: int) -> None:
        self.shown = f"{'a negative' if negative else 'a'} number of {digits} digits"
        super().__init__(f"out of range: {self.shown}")


def parse_whole_number(text: str) -> int:
    """``text`` as an int, or ``ValueError`` for anything but ASCII digits (see above):
    ``NumberTooLongError`` for more than ``MAX_DIGITS`` digits, leading zeros aside,
    which no range takes, never read whole (``int()`` of 4,301 digits or more raised a
    ValueError of its own, and a refusal quoted every digit)."""
    if not _WHOLE_NUMBER.fullmatch(text):
        raise ValueError(f"not a whole number: {text!r}")
    number = text.strip()
    negative = number.startswith("-")
    significant = number.removeprefix("-").lstrip("0")
    if len(significant) > MAX_DIGITS:
        raise NumberTooLongError(negative, len(significant))
    value = int(significant or "0")  # zeros before a number make it no longer
    return -value if negative else value
