"""The soft limits on open files the server tries at start (service/open_files.py;
docs/operations.md, "Sizing"): the hard limit, and where that cannot be set, as macOS's
infinite one cannot, its ``OPEN_MAX`` of 10,240. The real call on Linux is
``test_the_soft_open_files_limit_is_raised_to_the_hard_one`` (test_process_lifecycle)."""

from __future__ import annotations

import resource

import pytest

from service.open_files import FINITE_OPEN_FILES, soft_limits_to_try

# RLIM_INFINITY as Python on macOS has it (2**63 - 1); Linux's is -1 (all bits set).
MACOS_RLIM_INFINITY = (1 << 63) - 1


def test_macos_defaults_try_the_infinite_hard_limit_then_open_max() -> None:
    """macOS starts a shell's programs with 256 of an infinite hard limit, which
    ``setrlimit`` refuses as a soft one: before, the server kept 256 without a word."""
    assert FINITE_OPEN_FILES == 10240
    assert soft_limits_to_try(256, MACOS_RLIM_INFINITY, MACOS_RLIM_INFINITY) == [
        MACOS_RLIM_INFINITY,
        10240,
    ]
    infinity = resource.RLIM_INFINITY  # this platform's
    assert soft_limits_to_try(256, infinity) == [infinity, 10240]


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
    assert soft_limits_to_try(soft, hard, MACOS_RLIM_INFINITY) == tried
