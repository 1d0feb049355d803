"""Every section the repository cites is there.

Comments, docstrings, proto comments and docs send the reader to a section by its title:
``docs/operations.md, "Sizing"``, ``(docs/api.md, "Errors")``, ``clients/python/README.md,
"Asyncio"``, or, inside a doc, ``("Upgrades" above)``. A renamed heading broke such
citations silently (a review found a test citing a heading that never existed, a "below"
that was above, and client README sections cited as the root README's). A cited title
must be a heading of the file (any level, outside code fences, with or without a
trailing parenthesis) or a bold lead-in (``- **Drain**:``), whole or its start;
``below``/``above`` must hold. ``"Title" in FILE`` counts too, and k8s .env files are read.
"""

from __future__ import annotations

import io
import re
import subprocess
import tokenize
from bisect import bisect_right
from functools import cache
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
CITED = (
    "README.md",
    "clients/python/README.md",
    "docs/api.md",
    "docs/operations.md",
    "docs/benchmarks.md",
    "docs/krypkasino-decisions.md",
)
_FILE = (
    r"(?P<client>\bclient(?:'s)?\s+)?"
    r"(?P<file>clients/python/README\.md|(?:docs/)?(?:api|operations|benchmarks"
    r"|krypkasino-decisions)\.md|README\.md|README)"
)
# A capital or a backtick first, or a word like "gRPC": a quotation of prose is no title.
_TITLE = r'"(?P<title>(?:[A-Z`]|[a-z]+[A-Z])[^"]{1,90}?)"'
_CITATION = re.compile(r"`{0,2}" + _FILE + r"`{0,2}(?:'s)?(?:[,:]?\s+|\s+\()" + _TITLE)
_TITLE_FIRST = re.compile(_TITLE + r",?\s+(?:in|of)\s+(?:the service's\s+|the\s+)?`{0,2}" + _FILE)
_RELATIVE = re.compile(_TITLE + r"\)?,?\s+(?P<direction>below|above)\b")
_FILE_BEFORE = re.compile(_FILE + r"`{0,2}(?:'s)?[,:]?\s+\(?\Z")
_PROSE_SUFFIXES = (".py", ".md", ".proto", ".yaml", ".env")
_GENERATED = re.compile(r"_pb2(?:_grpc)?\.pyi?\Z")


class Citation(NamedTuple):
    where: str  # "path:line"
    cited: str
    title: str
    direction: str | None


def _normal(title: str) -> str:
    return " ".join(title.replace("`", "").split())


@cache
def titles(path: str) -> dict[str, list[int]]:
    """The file's headings (any level, outside fences, also without a trailing
    parenthesis) and bold lead-ins, each with the lines it is on."""
    found: dict[str, list[int]] = {}
    fence = False
    for number, line in enumerate((ROOT / path).read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
        elif fence:
            continue
        elif heading := re.match(r"#{1,6}\s+(.*?)\s*\Z", line):
            for title in {heading[1], re.sub(r"\s*\(.*\)\Z", "", heading[1])}:
                found.setdefault(_normal(title), []).append(number)
        elif lead_in := re.match(r"\s*(?:[-*]\s+)?\*\*([^*]+?)[.:]?\*\*", line):
            found.setdefault(_normal(lead_in[1]), []).append(number)
    return found


def prose(path: str) -> list[str]:
    """The file's lines, comment markers gone; of Python, its comments and strings only."""
    text = (ROOT / path).read_text()
    if path.endswith(".py"):
        lines = [""] * (text.count("\n") + 2)
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.COMMENT, tokenize.STRING):
                for offset, piece in enumerate(token.string.split("\n")):
                    lines[token.start[0] - 1 + offset] += " " + piece
        text = "\n".join(lines).replace("\\'", "'")
    return [re.sub(r"\A\s*(?:#:?|//+)?\s*", "", line) for line in text.split("\n")]


def _tracked() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [
        path
        for path in listed
        if (path.endswith(_PROSE_SUFFIXES) or path in ("Makefile", "Dockerfile"))
        and not path.startswith("third_party/")
        and not _GENERATED.search(path)
    ]


def _cited_file(name: str, citing: str, client: str | None) -> str:
    """The path of a cited name: a bare README is the client's inside the client's tree
    or after "client" ("the client README"), else the root's."""
    if name == "README":
        in_client = citing.startswith("clients/python/") or client is not None
        return "clients/python/README.md" if in_client else "README.md"
    return name if name.startswith(("docs/", "README", "clients/")) else f"docs/{name}"


def citations() -> list[Citation]:
    """Every section citation of the tracked files, lines joined so that a title broken
    over two lines is read whole."""
    found = []
    for path in _tracked():
        lines = prose(path)
        flat = " ".join(lines)
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line) + 1)

        def where(offset: int, path: str = path, starts: list[int] = starts) -> str:
            return f"{path}:{bisect_right(starts, offset)}"

        for match in (*_CITATION.finditer(flat), *_TITLE_FIRST.finditer(flat)):
            cited = _cited_file(match["file"], path, match["client"])
            found.append(Citation(where(match.start()), cited, match["title"], None))
        if path in CITED:
            for match in _RELATIVE.finditer(flat):
                if not _FILE_BEFORE.search(flat[max(0, match.start() - 45) : match.start()]):
                    found.append(
                        Citation(where(match.start()), path, match["title"], match["direction"])
                    )
    return found


CITATIONS = citations()


def test_the_citations_are_found() -> None:
    """The extraction itself: hundreds of citations, of every form."""
    assert len(CITATIONS) > 300
    cited = {(citation.cited, citation.title) for citation in CITATIONS}
    assert ("docs/operations.md", "Sizing") in cited
    assert any(citation.direction == "above" for citation in CITATIONS)
    assert any(citation.cited == "clients/python/README.md" for citation in CITATIONS)


@pytest.mark.parametrize("citation", CITATIONS, ids=lambda citation: citation.where)
def test_every_cited_section_is_there(citation: Citation) -> None:
    wanted = _normal(citation.title)
    lines = [
        line
        for title, at in titles(citation.cited).items()
        if title.startswith(wanted)  # a heading cited whole, or its start
        for line in at
    ]
    assert lines, f"{citation.where} cites {citation.cited}, {citation.title!r}: no such heading"
    if citation.direction:
        line = int(citation.where.rpartition(":")[2])
        assert any((heading > line) == (citation.direction == "below") for heading in lines), (
            f"{citation.where}: {citation.title!r} {citation.direction}, but it is at {lines}"
        )
