"""README, "Using the engine in-process": its example runs as a doctest, so the entry
points and refusals it shows cannot drift from the engine; and the engine is marked
typed (PEP 561), which the wheel ships (tests/deploy/test_build_context.py)."""

from __future__ import annotations

import doctest
from pathlib import Path

from tests.doc_blocks import fenced_blocks

ROOT = Path(__file__).resolve().parents[2]
SECTION = (
    (ROOT / "README.md")
    .read_text()
    .split("\n## Using the engine in-process\n", 1)[1]
    .split("\n## ", 1)[0]
)


def test_the_readme_example_runs() -> None:
    [block] = fenced_blocks(SECTION, "pycon")
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block, {}, "README in-process", "README.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0 and result.failed == 0


def test_the_engine_is_marked_typed() -> None:
    """PEP 561: without the marker mypy treats an installed ``engine`` as untyped."""
    assert (ROOT / "engine" / "py.typed").is_file()
