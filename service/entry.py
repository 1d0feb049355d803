"""The ``cardrules`` console script (docs/operations.md, "Termination").

``cardrules serve`` records stop signals before it imports the rest of the
server (``service.start_signals``), so that a SIGTERM that comes while it starts
is kept, not lost; every other command runs as ``service.cli`` has it.
"""

from __future__ import annotations

import sys

from service.start_signals import record_from_start


def main() -> int:
    if sys.argv[1:2] == ["serve"]:
        record_from_start()
    try:
        from service import cli  # only now: its imports take a few tenths of a second
    except KeyboardInterrupt:  # Ctrl-C while it starts: as cli.main reports it later
        if sys.stderr is not None:
            print("cardrules: error: interrupted", file=sys.stderr)
        return 128 + 2
    return cli.main()
