"""No documented container command puts a state key among its own arguments.

Every user of the operator's machine can read a command's arguments (``ps``,
``/proc/PID/cmdline``), as the server warns for ``--state-keys``. ``docker run -e
CARDRULES_STATE_KEYS="$(cardrules keygen)"`` puts the key in docker's; ``-e NAME``
alone passes the variable on from docker's environment, which only its user can read.
(The kubectl commands are run against a double that refuses a key among its
arguments: tests/deploy/test_key_rotation_steps.py.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.deploy.manifests import ROOT

#: ``-e NAME=VALUE`` or ``--env NAME=VALUE`` for the keys: the value is an argument.
KEYS_AS_ARGUMENT = re.compile(r"(?:-e|--env)[ =]CARDRULES_STATE_KEYS=")
CONTAINER_RUN = re.compile(r"\b(?:docker|podman) run\b")


@pytest.mark.parametrize(
    "path", [ROOT / "docs" / "operations.md", ROOT / "README.md", ROOT / "Dockerfile"]
)
def test_the_container_examples_pass_the_keys_in_the_environment(path: Path) -> None:
    text = path.read_text()
    assert not KEYS_AS_ARGUMENT.findall(text)


def test_the_guides_docker_run_example_passes_the_keys_on() -> None:
    """The example still gives the server keys: ``-e`` names the variable."""
    text = (ROOT / "docs" / "operations.md").read_text()
    (example,) = re.findall(r'^CARDRULES_STATE_KEYS="\$\(.*?cardrules:0\.1\.0$', text, re.M | re.S)
    assert CONTAINER_RUN.search(example) and "-e CARDRULES_STATE_KEYS " in example
