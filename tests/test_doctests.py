"""The examples in the docstrings run, as python-chess's and PokerKit's do (design section
8): the hand ``engine.krypkasino`` plays in its docstring could break unseen otherwise.
Every module of ``engine/``, ``service/`` and the Python client with an example is
found, not listed, so a new one is run too."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Each source root with the packages under it whose modules are searched.
_SOURCES = [(ROOT, "engine"), (ROOT, "service"), (ROOT / "clients/python/src", "cardrules/client")]
WITH_EXAMPLES = sorted(
    ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
    for root, package in _SOURCES
    for path in (root / package).rglob("*.py")
    if ">>> " in path.read_text(encoding="utf-8")
)


def test_the_examples_are_found() -> None:
    assert {"engine.krypkasino", "engine.cards", "cardrules.client"} <= set(WITH_EXAMPLES)


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_the_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0
    assert result.failed == 0
