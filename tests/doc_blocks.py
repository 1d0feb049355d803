"""Fenced code blocks of the project's Markdown, for tests that run or parse them."""

from __future__ import annotations

import re
import textwrap


def fenced_blocks(text: str, language: str) -> list[str]:
    """Every fenced block of ``language`` in ``text``, dedented: indented ones (inside a
    list item) too, each closed by a fence at its own indentation."""
    fence = re.compile(rf"^( *)```{re.escape(language)}\n(.*?)^\1```$", re.MULTILINE | re.DOTALL)
    return [textwrap.dedent(match[2]) for match in fence.finditer(text)]
