"""README, "Contributing": every file it sends a contributor to exists, and every name it
cites is defined where it says, so that a rename breaks this test rather than the guide."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECTION = (ROOT / "README.md").read_text().split("\n## Contributing\n", 1)[1].split("\n## ", 1)[0]

# The names the section cites, each with the file that must define it (a function, a
# class or a module-level assignment).
DEFINED = [
    ("tests/service/server_process.py", "running"),
    ("tests/service/conftest.py", "server"),
    ("tests/sizes.py", "fuzz_examples"),
    ("tests/sizes.py", "random_games"),
    ("engine/krypkasino/config.py", "Rules"),
    ("engine/krypkasino/config.py", "ConfigError"),
    ("service/codec.py", "config_from_proto"),
    ("service/codec.py", "_rules_to_proto"),
    (
        "tests/engine/krypkasino/test_rules.py",
        "test_k16_flag_names_are_the_boolean_flags_in_the_spec_order",
    ),
    ("tests/engine/krypkasino/configs.py", "SINGLE"),
    ("tests/engine/krypkasino/configs.py", "PAIRS"),
    ("tests/engine/krypkasino/configs.py", "random_config"),
    ("tests/engine/krypkasino/test_rules.py", "ANY_FLAG"),
    ("service/codec.py", "_fill_legal_move"),
    ("engine/krypkasino/policies.py", "points_taken"),
    ("tests/engine/krypkasino/test_random_play.py", "_expected_sweep"),
    ("tests/engine/krypkasino/test_random_play.py", "_card_items"),
    ("tests/engine/krypkasino/test_random_play.py", "_point_total"),
    ("tests/engine/krypkasino/test_random_play.py", "_check_deal_end"),
    ("tests/engine/krypkasino/test_random_play.py", "_check_scores"),
    ("tests/engine/krypkasino/test_reference.py", "FLAG_NAMES"),
    ("bench/soak_configs.py", "FREE_FLAGS"),
]

# The headings the section sends a reader to, each in the file that must hold it.
HEADINGS = [
    ("docs/krypkasino-decisions.md", "House variants"),
]


def defined_names(path: Path) -> set[str]:
    """Top-level functions, classes and assigned names of a Python file, and methods."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def cited_paths() -> list[str]:
    """Every code-quoted repository path of the section (``tests/...``, ``docs/x.md`` ...)."""
    quoted = re.findall(r"`([^`\s]+)`", SECTION)
    paths = [q for q in quoted if "/" in q and not q.startswith(".venv/")]
    paths += re.findall(r"`\.venv/bin/python ([^`\s]+)`", SECTION)
    paths += re.findall(r"\b(docs/[\w.-]+\.md)\b", SECTION)
    return sorted(set(paths))


def test_the_section_cites_paths():
    """The extraction below finds what it should, so an empty list cannot pass."""
    assert "tests/golden/krypkasino/regenerate.py" in cited_paths()
    assert "docs/api.md" in cited_paths()


@pytest.mark.parametrize("path", cited_paths())
def test_every_cited_path_exists(path: str):
    assert (ROOT / path.rstrip("/")).exists(), path


@pytest.mark.parametrize(("path", "name"), DEFINED)
def test_every_cited_name_is_defined_where_the_section_says(path: str, name: str):
    quoted = re.findall(r"`([^`]+)`", SECTION)
    assert any(re.search(rf"\b{name}\b", q) for q in quoted), f"{name} is no longer cited"
    assert path in SECTION or Path(path).name in SECTION, path
    assert name in defined_names(ROOT / path), (path, name)


@pytest.mark.parametrize(("path", "heading"), HEADINGS)
def test_every_cited_heading_is_where_the_section_says(path: str, heading: str):
    flat = " ".join(SECTION.split())
    assert f'"{heading}"' in flat and path in flat, (path, heading)
    text = (ROOT / path).read_text()
    assert re.search(rf"^#+ {re.escape(heading)}$", text, re.MULTILINE), (path, heading)
