"""The name a misspelt one most likely meant, for the hints of refusals and warnings.

Names are compared in lowercase by difflib's ratio, which must be at least 0.85:
one slip away (a letter missed or doubled, another case, "/" for ":") reads 0.85 or
more ("team" for "teams" 0.89, "/v1/krypkasino/score" 0.95), where unrelated names
read less ("/v1/krypkasino:shuffle" against "/v1/krypkasino:score" 0.81, the common
prefix counting; ":shuffle" against ":score" alone 0.43, "seed" against "seat" 0.5).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

NEAR = 0.85


def nearest(word: str, names: Iterable[str]) -> str | None:
    """The one of ``names`` a slip away from ``word``, if any (the likeliest)."""
    by_lowercase = {name.lower(): name for name in names}
    found = difflib.get_close_matches(word.lower(), by_lowercase, n=1, cutoff=NEAR)
    return by_lowercase[found[0]] if found else None
