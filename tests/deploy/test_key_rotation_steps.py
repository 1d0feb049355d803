"""The state key commands of docs/operations.md and the dev overlay, run as written.

The shell functions and each step's block of "Key rotation", and the commands that
create the key Secret, are taken from the documents and run by bash, with the
repository's real ``cardrules keygen``; ``kubectl`` is the double of
tests/deploy/kubectl_double.py, since no cluster runs here. What is checked is the
steps' own logic: the key list each writes, that every list written is one the server
takes, and that a step run out of order, or on a Secret it cannot read, writes
nothing; and that no command hands kubectl a key among its arguments, which every
user of the machine can read (the double refuses it).
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from service.tokens import KeyRing
from tests.deploy.manifests import ROOT
from tests.doc_blocks import fenced_blocks

OPERATIONS = ROOT / "docs" / "operations.md"
DEV_OVERLAY = ROOT / "k8s" / "overlays" / "dev"
DOUBLE = Path(__file__).with_name("kubectl_double.py")
CARDRULES = Path(sys.executable).parent / "cardrules"


def _section() -> str:
    text = OPERATIONS.read_text()
    return text[text.index("## Key rotation") : text.index("## Metrics and alerts")]


def _blocks() -> list[str]:
    """The section's ``sh`` blocks, dedented: the functions, then steps 1, 2 and 3."""
    return fenced_blocks(_section(), "sh")


FUNCTIONS, *STEPS = _blocks()
LEAKED_KEY = re.search(r"`(\( set -euo pipefail; NEW=.*? \))`", _section())


def test_the_section_holds_the_functions_three_steps_and_the_leaked_key_line() -> None:
    assert "keys() {" in FUNCTIONS and "set_keys() {" in FUNCTIONS
    assert len(STEPS) == 3 and LEAKED_KEY is not None


class Cluster:
    """The Secret as the double keeps it, and a way to run a step against it."""

    def __init__(self, folder: Path, keys: str | None, step: str | None = None) -> None:
        self.state = folder / "cluster.json"
        data = {}
        if keys is not None:
            data["state-keys"] = base64.b64encode(keys.encode()).decode()
        if step is not None:
            data["rotation-step"] = base64.b64encode(step.encode()).decode()
        self.state.write_text(json.dumps({"secret": data, "calls": []}))
        self.bin = folder / "bin"
        self.bin.mkdir()
        kubectl = self.bin / "kubectl"
        kubectl.write_text(f'#!/bin/sh\nexec {sys.executable} {DOUBLE} "$@"\n')
        kubectl.chmod(0o755)
        # The overlay's comments name `cardrules` as installed, not .venv/bin/cardrules.
        cardrules = self.bin / "cardrules"
        cardrules.write_text(f'#!/bin/sh\nexec {CARDRULES} "$@"\n')
        cardrules.chmod(0o755)

    def run(self, block: str, **env: str) -> subprocess.CompletedProcess[str]:
        # sleep: set_keys waits out the old pods, which the double has none of.
        script = f"sleep() {{ :; }}\n{FUNCTIONS}\n{block}"
        environ = {
            **os.environ,
            "PATH": f"{self.bin}:{os.environ['PATH']}",
            "KUBECTL_DOUBLE_STATE": str(self.state),
            **env,
        }
        return subprocess.run(
            ["bash", "-c", script], cwd=ROOT, env=environ, capture_output=True, text=True
        )

    def secret(self) -> dict[str, str]:
        data = json.loads(self.state.read_text())["secret"]
        return {key: base64.b64decode(value).decode() for key, value in data.items()}

    def calls(self) -> list[list[str]]:
        """Every command run, as its arguments."""
        calls: list[list[str]] = json.loads(self.state.read_text())["calls"]
        return calls

    def patches(self) -> list[dict[str, Any]]:
        """The body of every patch, as kubectl read it from stdin."""
        state = json.loads(self.state.read_text())
        return [json.loads(patch) for patch in state.get("patches", [])]

    def rollouts(self) -> int:
        return sum(call[2:4] == ["rollout", "restart"] for call in self.calls())


OLD = KeyRing.generate_key_text()
OTHER = KeyRing.generate_key_text()


def test_the_three_steps_rotate_old_to_new(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, OLD)
    step_1, step_2, step_3 = STEPS
    assert cluster.run(step_1).returncode == 0
    keys = cluster.secret()["state-keys"].split(",")
    assert keys[0] == OLD and len(keys) == 2 and keys[1] != OLD
    new = keys[1]
    assert cluster.secret()["rotation-step"] == "1"
    assert cluster.run(step_2).returncode == 0
    assert cluster.secret() == {"state-keys": f"{new},{OLD}", "rotation-step": "2"}
    assert cluster.run(step_3).returncode == 0
    assert cluster.secret() == {"state-keys": new, "rotation-step": "3"}
    assert cluster.rollouts() == 3
    assert len(KeyRing.parse(new).keys) == 1


def test_the_steps_write_the_keys_only_into_the_secrets_data(tmp_path: Path) -> None:
    """Each write patches the two entries: ``kubectl apply`` copied the whole Secret, keys
    included, into its last-applied-configuration annotation (a deployment review)."""
    cluster = Cluster(tmp_path, OLD)
    for step in STEPS:
        assert cluster.run(step).returncode == 0
    writes = [call[2:] for call in cluster.calls() if call[2] not in ("get", "rollout")]
    assert [write[:3] for write in writes] == [["patch", "secret", "cardrules-state-keys"]] * 3
    assert [set(patch) for patch in cluster.patches()] == [{"stringData"}] * 3


def test_set_keys_refuses_what_no_key_list_holds(tmp_path: Path) -> None:
    """What would break the patch's JSON, or put something but keys in the Secret."""
    cluster = Cluster(tmp_path, OLD)
    done = cluster.run(f'set_keys "{OLD}\\",\\"x" 1')
    assert done.returncode != 0 and "a key list of other characters" in done.stderr
    assert cluster.secret() == {"state-keys": OLD} and cluster.calls() == []


@pytest.mark.parametrize(
    ("keys", "step", "run", "message"),
    [
        ("OLD,NEW", "1", 0, "the Secret holds two keys: finish that rotation first"),
        ("OLD,NEW", "2", 1, "step 1 is not the last step done: nothing swapped"),
        ("OLD", "3", 1, "step 1 is not the last step done: nothing swapped"),
        ("OLD,NEW", "1", 2, "step 2 is not the last step done: no key retired"),
        ("", None, 0, "the Secret holds no state keys"),
        (None, None, 0, "the Secret holds no state keys"),
    ],
)
def test_a_step_out_of_order_writes_nothing(
    tmp_path: Path, keys: str | None, step: str | None, run: int, message: str
) -> None:
    spelled = None if keys is None else keys.replace("OLD", OLD).replace("NEW", OTHER)
    cluster = Cluster(tmp_path, spelled, step)
    before = cluster.secret()
    done = cluster.run(STEPS[run])
    assert done.returncode != 0 and message in done.stderr
    assert cluster.secret() == before and cluster.rollouts() == 0


def test_the_steps_work_in_the_namespace_ns_names(tmp_path: Path) -> None:
    """The functions once named ``cardrules``, prod's namespace, in every command: a
    rotation of dev from a context that reaches prod rewrote prod's Secret."""
    cluster = Cluster(tmp_path, OLD)
    dev = {"KUBECTL_DOUBLE_NAMESPACE": "cardrules-dev"}
    done = cluster.run(STEPS[0], **dev)
    assert done.returncode != 0 and 'namespaces "cardrules" not found' in done.stderr
    assert cluster.run(STEPS[0], NS="cardrules-dev", **dev).returncode == 0
    assert cluster.secret()["rotation-step"] == "1" and cluster.rollouts() == 1


def test_a_secret_that_cannot_be_read_stops_step_1_before_it_writes(tmp_path: Path) -> None:
    """Read as an empty list, it would make step 1 write ``,NEW``: every game breaks."""
    cluster = Cluster(tmp_path, OLD)
    done = cluster.run(STEPS[0], KUBECTL_DOUBLE_FAIL_GET="1")
    assert done.returncode != 0 and "Forbidden" in done.stderr
    assert cluster.secret() == {"state-keys": OLD} and cluster.rollouts() == 0


@pytest.mark.parametrize("separator", ["\n", " ", ", ", "\n\n"])
def test_two_keys_in_any_spelling_the_server_takes_are_two_keys_to_the_steps(
    tmp_path: Path, separator: str
) -> None:
    """The server takes keys separated by commas or white space (docs/api.md), as a
    Secret made from a keys file of one key per line holds them: step 1 must see two
    keys there too, and step 2 swap them."""
    written = f"{OLD}{separator}{OTHER}\n"
    cluster = Cluster(tmp_path, written)
    done = cluster.run(STEPS[0])
    assert done.returncode != 0 and "holds two keys" in done.stderr
    swapped = tmp_path / "step-2"
    swapped.mkdir()
    cluster = Cluster(swapped, written, "1")
    assert cluster.run(STEPS[1]).returncode == 0
    assert cluster.secret()["state-keys"] == f"{OTHER},{OLD}"


def test_a_leaked_key_is_replaced_at_once(tmp_path: Path) -> None:
    assert LEAKED_KEY is not None
    cluster = Cluster(tmp_path, f"{OLD},{OTHER}", "1")
    assert cluster.run(LEAKED_KEY[1]).returncode == 0
    secret = cluster.secret()
    assert secret["rotation-step"] == "3" and OLD not in secret["state-keys"]
    assert len(KeyRing.parse(secret["state-keys"]).keys) == 1


def test_no_step_hands_kubectl_a_key_among_its_arguments(tmp_path: Path) -> None:
    """Every local user can read a command's arguments (ps, /proc/PID/cmdline): set_keys
    once patched with ``-p '{...OLD,NEW...}'``. The keys go on stdin; the double refuses
    a key on its command line, so a step that passed one would fail above too."""
    cluster = Cluster(tmp_path, OLD)
    for step in STEPS:
        assert cluster.run(step).returncode == 0
    new = cluster.secret()["state-keys"]
    written = [patch["stringData"]["state-keys"] for patch in cluster.patches()]
    assert written == [f"{OLD},{new}", f"{new},{OLD}", new]
    assert not any(OLD in arg or new in arg for call in cluster.calls() for arg in call)


def _secret_commands(path: Path) -> list[str]:
    """Each shell command in ``path`` (continued by a trailing ``\\`` or ``|``) that
    creates the key Secret; in a YAML file, from its comments."""
    commands, current = [], []
    for line in path.read_text().splitlines():
        current.append(line.removeprefix("#") if path.suffix == ".yaml" else line)
        if not line.rstrip().endswith(("\\", "|")):
            command = "\n".join(current)
            current = []
            if "create secret generic cardrules-state-keys" in command:
                commands.append(textwrap.dedent(command))
    return commands


#: Where the Secret is created, and the namespace of each command there, in order.
SECRET_COMMAND_SOURCES = {
    OPERATIONS: ["cardrules", "cardrules-dev"],
    DEV_OVERLAY / "kustomization.yaml": ["cardrules-dev"],
    DEV_OVERLAY / "state-keys-secret.example.yaml": ["cardrules-dev"],
}
SECRET_COMMANDS = [
    (command, namespace)
    for path, namespaces in SECRET_COMMAND_SOURCES.items()
    for command, namespace in zip(_secret_commands(path), namespaces, strict=False)
]


def test_the_secret_is_created_in_the_guide_and_in_both_dev_overlay_comments() -> None:
    found = {path: len(_secret_commands(path)) for path in SECRET_COMMAND_SOURCES}
    assert found == {path: len(spaces) for path, spaces in SECRET_COMMAND_SOURCES.items()}


@pytest.mark.parametrize(("command", "namespace"), SECRET_COMMANDS)
def test_a_documented_create_command_makes_a_secret_of_one_key(
    tmp_path: Path, command: str, namespace: str
) -> None:
    """Run by the real kubectl (client side): the Secret holds one new key, exactly as
    ``--from-literal=state-keys="$(cardrules keygen)"`` made it, with no newline; and the
    key went in on stdin, since ``--from-literal`` put it where ps shows it."""
    cluster = Cluster(tmp_path, None)
    done = cluster.run(f"set -euo pipefail\n{command}", KUBECTL_DOUBLE_NAMESPACE=namespace)
    assert done.returncode == 0, done.stderr
    (call,) = cluster.calls()
    assert call[:2] == ["-n", namespace]
    assert call[2:6] == ["create", "secret", "generic", "cardrules-state-keys"]
    key = cluster.secret()["state-keys"]
    assert list(cluster.secret()) == ["state-keys"] and key == key.strip()
    assert len(KeyRing.parse(key).keys) == 1 and key not in (OLD, OTHER)


@pytest.mark.parametrize(
    "command",
    [
        "kubectl -n cardrules patch secret cardrules-state-keys "
        f"""-p '{{"stringData":{{"state-keys":"{OLD},{OTHER}"}}}}'""",
        "kubectl -n cardrules create secret generic cardrules-state-keys "
        f'--from-literal=state-keys="{OTHER.rstrip("=").replace("+", "-").replace("/", "_")}"',
    ],
)
def test_the_double_refuses_a_key_on_kubectls_command_line(tmp_path: Path, command: str) -> None:
    """What makes the tests above fail on a command that shows a key to ps."""
    cluster = Cluster(tmp_path, OLD)
    done = cluster.run(command)
    assert done.returncode != 0 and "a state key on the command line" in done.stderr
    assert cluster.secret() == {"state-keys": OLD}
