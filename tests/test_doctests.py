"""The examples in the docstrings of ``engine/`` and ``service/`` run, as python-chess's and
PokerKit's do (design section 8): the hand ``engine.krypkasino`` plays in its docstring
could break unseen otherwise. Every module with an example is found, not listed, so a
new one is run too. (The client's run in ``tests/service/test_client.py``.)"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WITH_EXAMPLES = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for package in ("engine", "service")
    for path in (ROOT / package).rglob("*.py")
    if ">>> " in path.read_text(encoding="utf-8")
)


def test_the_examples_are_found() -> None:
    assert "engine.krypkasino" in WITH_EXAMPLES and "engine.cards" in WITH_EXAMPLES


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_the_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0
    assert result.failed == 0
