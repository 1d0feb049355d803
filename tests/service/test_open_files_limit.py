"""The soft limits on open files the server tries at start (service/open_files.py;
docs/operations.md, "Sizing"): the hard limit, and where that cannot be set, as macOS's
infinite one cannot, its ``OPEN_MAX`` of 10,240. The real call on Linux is
``test_the_soft_open_files_limit_is_raised_to_the_hard_one`` (test_process_lifecycle)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from service.open_files import FINITE_OPEN_FILES, soft_limits_to_try

# RLIM_INFINITY as Python on macOS has it (2**63 - 1); Linux's is -1 (all bits set).
MACOS_RLIM_INFINITY = (1 << 63) - 1
ROOT = Path(__file__).resolve().parents[2]


def test_macos_defaults_try_the_infinite_hard_limit_then_open_max() -> None:
    """macOS starts a shell's programs with 256 of an infinite hard limit, which
    ``setrlimit`` refuses as a soft one: before, the server kept 256 without a word."""
    assert FINITE_OPEN_FILES == 10240
    assert soft_limits_to_try(256, MACOS_RLIM_INFINITY) == [MACOS_RLIM_INFINITY, 10240]


@pytest.mark.parametrize(
    ("soft", "hard", "tried"),
    [
        (1024, 524288, [524288, 10240]),  # systemd 240 or newer
        (1024, 4096, [4096]),  # an older systemd: its hard limit is the finite one too
        (256, 10240, [10240]),
        (1048576, 1048576, []),  # a container's: nothing to raise
        (20000, MACOS_RLIM_INFINITY, [MACOS_RLIM_INFINITY]),  # already above OPEN_MAX
    ],
)
def test_the_hard_limit_comes_first_and_a_lower_one_only_above_the_soft(
    soft: int, hard: int, tried: list[int]
) -> None:
    assert soft_limits_to_try(soft, hard) == tried


# In a process of its own, with a hard limit of 4,096 it lowered itself to: a soft limit
# above the hard one is what Linux's setrlimit refuses, as macOS's refuses its infinite one.
_TRY = """
import resource, sys
from service.open_files import set_first_soft_limit
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 4096))
print(set_first_soft_limit([int(n) for n in sys.argv[1:]], 4096),
      *resource.getrlimit(resource.RLIMIT_NOFILE))
"""


@pytest.mark.parametrize(
    ("limits", "printed"),
    [
        (["8192", "4096"], "4096 4096 4096"),  # the first refused, the next one set
        (["8192"], "None 1024 4096"),  # none taken: the soft limit is left as it was
        # A soft limit below the hard one leaves the hard one where it was: lowered, no
        # unprivileged process could raise it again.
        (["8192", "2048"], "2048 2048 4096"),
    ],
)
def test_a_limit_setrlimit_refuses_gives_way_to_the_next(limits: list[str], printed: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _TRY, *limits], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.split() == printed.split()
