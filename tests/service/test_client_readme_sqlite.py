"""The client README's optimistic-concurrency example (clients/python/README.md, "A
complete game") closes its sqlite connection: left open, it made Python 3.13 print
``ResourceWarning: unclosed database`` (an error under ``-W error``) in a maintainer's
run. A backend copies the example, so it must be one that cleans up after itself.
"""

from __future__ import annotations

import gc
import sqlite3
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.doc_blocks import fenced_blocks

README = Path(__file__).resolve().parents[2] / "clients" / "python" / "README.md"
README_TARGET = "localhost:50051"


def sqlite_example() -> str:
    (block,) = [b for b in fenced_blocks(README.read_text(), "python") if "sqlite3" in b]
    return block


def test_the_sqlite_example_closes_its_connection(grpc_target: str, capsys) -> None:
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = compile(sqlite_example().replace(README_TARGET, grpc_target), "README.md", "exec")
        exec(code, namespace)
        db = namespace["db"]
        assert isinstance(db, sqlite3.Connection)
        # A closed connection refuses every statement: the example closed it itself.
        with pytest.raises(sqlite3.ProgrammingError, match="closed database"):
            db.execute("SELECT 1")
        del db, namespace
        gc.collect()
    assert "move stored\n" in capsys.readouterr().out
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
