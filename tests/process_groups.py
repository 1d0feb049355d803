"""Whether a process group still has a member: what a benchmark interrupted left running."""

from __future__ import annotations

import os


def group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True
