"""Design section 1: engine/ is pure rules. It imports only the standard library and
``engine`` itself (no grpc, protobuf, service, structlog ...), reads no clock, and
takes its chance only from seeded ``random.Random`` instances (``engine.cards``),
never from the random module's global generator.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.source_imports import imported_top_level_modules

ENGINE = Path(__file__).resolve().parents[2] / "engine"
ENGINE_FILES = sorted(ENGINE.rglob("*.py"))
CLOCKS = {"time", "datetime"}
# The module-level functions of ``random`` share one hidden generator that nothing
# seeds; the class is how a seeded one is made.
SEEDED_GENERATOR = "Random"


def global_random_uses(tree: ast.Module) -> list[str]:
    """Every name of the random module other than its generator class, imported or used."""
    aliases = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "random"
    }
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "random":
            uses += [
                f"line {node.lineno}: from random import {alias.name}"
                for alias in node.names
                if alias.name != SEEDED_GENERATOR
            ]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr != SEEDED_GENERATOR
        ):
            uses.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return uses


def impurities(path: Path) -> list[str]:
    """What in one source file breaks design section 1; empty when it is pure."""
    modules = imported_top_level_modules(path)
    found = [
        f"imports {module}, which is neither the standard library nor engine"
        for module in sorted(modules)
        if module != "engine" and module not in sys.stdlib_module_names
    ]
    found += [f"imports the clock module {module}" for module in sorted(modules & CLOCKS)]
    return found + global_random_uses(ast.parse(path.read_text(), str(path)))


def test_every_engine_module_is_checked() -> None:
    assert ENGINE / "cards.py" in ENGINE_FILES
    assert ENGINE / "krypkasino" / "play.py" in ENGINE_FILES


@pytest.mark.parametrize("path", ENGINE_FILES, ids=lambda p: str(p.relative_to(ENGINE.parent)))
def test_engine_module_is_pure(path: Path) -> None:
    assert impurities(path) == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("import grpc", "imports grpc, which is neither"),
        ("from google.protobuf import message", "imports google, which is neither"),
        ("from service.errors import to_status", "imports service, which is neither"),
        ("def log():\n    import structlog", "imports structlog, which is neither"),
        ("import time", "imports the clock module time"),
        ("from datetime import datetime", "imports the clock module datetime"),
        ("import random\nrandom.shuffle(cards)", "line 2: random.shuffle"),
        ("import random as chance\nx = chance.random()", "line 2: chance.random"),
        ("from random import choice", "line 1: from random import choice"),
    ],
)
def test_impurities_are_found(tmp_path: Path, source: str, found: str) -> None:
    path = tmp_path / "module.py"
    path.write_text(source)
    problems = impurities(path)
    assert len(problems) == 1
    assert problems[0].startswith(found)


@pytest.mark.parametrize(
    "source",
    [
        "import random\nrng = random.Random(7)\nrng.shuffle(cards)",
        "from random import Random",
        "from engine.cards import Card",
        "from . import moves",
        "from collections.abc import Sequence",
    ],
)
def test_pure_sources_pass(tmp_path: Path, source: str) -> None:
    path = tmp_path / "module.py"
    path.write_text(source)
    assert impurities(path) == []
