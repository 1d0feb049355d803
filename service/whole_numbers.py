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


def parse_whole_number(text: str) -> int:
    """``text`` as an int, or ``ValueError`` for anything but ASCII digits (see above)."""
    if not _WHOLE_NUMBER.fullmatch(text):
        raise ValueError(f"not a whole number: {text!r}")
    return int(text)
