"""Regenerate the Krypkasino golden playthroughs from their command lines.

``index.json`` lists every transcript: its file, a description and the exact
``cardrules`` arguments (``argv``; ``command`` is the same as a shell line).
Each file is the byte-exact stdout of that command, run in-process here.

Run from the repository root after a deliberate change to the engine, the
policies or the transcript format, then review the diff before committing::

    .venv/bin/python tests/golden/krypkasino/regenerate.py

To add a transcript, add an entry (``file``, ``description``, ``argv``) to
``index.json`` and run the script; it fills in ``command``.
``tests/service/test_golden.py`` fails whenever a file differs from a fresh run.
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import sys
from pathlib import Path

from service.cli import main

HERE = Path(__file__).resolve().parent
INDEX = HERE / "index.json"


def run(argv: list[str]) -> str:
    """The stdout of ``cardrules <argv>``, run in-process; raises if it fails."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(argv)
    if status != 0:
        raise RuntimeError(f"cardrules {shlex.join(argv)} exited with status {status}")
    return out.getvalue()


def regenerate() -> list[Path]:
    """Rewrite every transcript of the index (and its ``command`` field); returns the files."""
    index = json.loads(INDEX.read_text())
    written = []
    for entry in index["transcripts"]:
        entry["command"] = shlex.join(["cardrules", *entry["argv"]])
        path = HERE / entry["file"]
        path.write_text(run(entry["argv"]))
        written.append(path)
    INDEX.write_text(json.dumps(index, indent=2) + "\n")
    return written


if __name__ == "__main__":
    for path in regenerate():
        print(f"wrote {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    sys.exit(0)
