"""What a Python source file imports, read with ``ast`` without running it, for the
tests that check which packages a layer may import."""

from __future__ import annotations

import ast
from pathlib import Path


def imported_top_level_modules(path: Path) -> set[str]:
    """The top-level names of every absolute import in the file, nested ones included;
    relative imports stay inside the file's own package and are left out."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
    return modules
