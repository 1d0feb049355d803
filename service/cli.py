"""The ``cardrules`` command line."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    raise SystemExit("cardrules: no command yet")
