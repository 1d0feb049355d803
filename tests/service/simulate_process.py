"""``cardrules simulate`` as a real process that a test can stop with a signal."""

from __future__ import annotations

import sys

# SIGINT set to its default action, then the command: a test run started in the
# background by a script has SIGINT ignored, and an ignored signal stays ignored
# across exec, where the command would rightly leave it so.
_WITH_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'service', *sys.argv[1:]])"
)


def simulate_command(*argv: str) -> list[str]:
    """``python -m service simulate krypkasino ARGV`` with SIGINT's default action."""
    return [sys.executable, "-c", _WITH_SIGINT, "simulate", "krypkasino", *argv]
