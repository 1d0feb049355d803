"""The rendered ``k8s/`` manifests and what they tell the server.

Helpers shared by the deployment tests: render an overlay (with the real
kustomize, tests/deploy/rendering.py), pick objects, and turn the Deployment's
configuration (ConfigMap through ``envFrom`` plus explicit ``env``) into the
environment the server would see.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from service.config import ServerConfig, add_server_arguments, env_name, resolve
from tests.deploy.rendering import Manifest, kustomize, load_documents

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
DOCKERFILE = ROOT / "Dockerfile"
OVERLAYS = ("base", "overlays/dev", "overlays/prod")
EXAMPLE_SECRET = K8S / "overlays" / "dev" / "state-keys-secret.example.yaml"
CONFIG_PREFIX = "CARDRULES_"


# Once per overlay and test process: every deploy test reads the same three renders.
@functools.cache
def _rendered(overlay: str) -> tuple[Manifest, ...]:
    return tuple(kustomize(K8S / overlay))


def rendered(overlay: str) -> list[Manifest]:
    """The objects of ``kubectl kustomize k8s/<overlay>`` (a fresh deep copy per call)."""
    return copy.deepcopy(list(_rendered(overlay)))


def example_secret() -> Manifest:
    (secret,) = load_documents(EXAMPLE_SECRET)
    return secret


def one(objects: list[Manifest], kind: str, name: str | None = None) -> Manifest:
    """The single object of ``kind`` (and ``name``); fails if there is not exactly one."""
    found = [
        item
        for item in objects
        if item["kind"] == kind and (name is None or item["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def all_of(objects: list[Manifest], kind: str) -> list[Manifest]:
    return [item for item in objects if item["kind"] == kind]


def container(objects: list[Manifest]) -> dict[str, Any]:
    """The one container of the one Deployment."""
    (only,) = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    result: dict[str, Any] = only
    return result


def container_ports(objects: list[Manifest]) -> dict[str, int]:
    """Container port numbers by port name."""
    return {port["name"]: port["containerPort"] for port in container(objects)["ports"]}


def manifest_env(
    objects: list[Manifest], secrets: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The container's environment: ConfigMaps of ``envFrom``, then ``env`` (which wins).

    ``secrets`` supplies values for ``secretKeyRef`` entries, keyed by env var
    name; without it they read ``<secret>``.
    """
    spec = container(objects)
    environ: dict[str, str] = {}
    for source in spec.get("envFrom", []):
        config_map = one(objects, "ConfigMap", source["configMapRef"]["name"])
        environ.update({key: str(value) for key, value in config_map["data"].items()})
    for entry in spec.get("env", []):
        if "value" in entry:
            environ[entry["name"]] = str(entry["value"])
        elif "secretKeyRef" in entry.get("valueFrom", {}):
            environ[entry["name"]] = "<secret>" if secrets is None else secrets[entry["name"]]
        else:
            raise AssertionError(f"unexpected env source {entry}")
    return environ


def manifest_env_names(objects: list[Manifest]) -> set[str]:
    """Every environment variable name the Deployment sets (ConfigMap keys included)."""
    return set(manifest_env(objects))


def server_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cardrules serve")
    add_server_arguments(parser)
    return parser


def accepted_env_names() -> set[str]:
    """The ``CARDRULES_*`` variables ``cardrules serve`` reads: one per flag (service/config.py)."""
    dests = {action.dest for action in server_parser()._actions if action.dest != "help"}
    return {env_name(dest) for dest in dests}


def config_fields() -> set[str]:
    return {field.name for field in dataclasses.fields(ServerConfig)}


def effective_config(environ: Mapping[str, str]) -> ServerConfig:
    """What the server resolves from this environment and no flags."""
    return resolve(server_parser().parse_args([]), environ=environ)


def loopback_args() -> list[str]:
    """Extra flags for a test server: every port the server knows on an ephemeral port.

    ``start_server`` sets host, gRPC and metrics; the HTTP gateway port exists only
    once the server has an ``http_port`` setting.
    """
    return ["--http-port", "0"] if "http_port" in config_fields() else []


def pre_stop_seconds(objects: list[Manifest]) -> float:
    """The preStop pause: an ``exec`` of ``sleep N`` or a ``sleep`` action."""
    hook = container(objects)["lifecycle"]["preStop"]
    if "sleep" in hook:
        return float(hook["sleep"]["seconds"])
    command = hook["exec"]["command"]
    assert command[0] in ("sleep", "/bin/sleep", "/usr/bin/sleep") and len(command) == 2, command
    return float(command[1])


_QUANTITY = re.compile(r"^([0-9.]+)(m|Ki|Mi|Gi|k|M|G)?$")
_FACTORS = {
    None: 1.0,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
}


def quantity(value: str | int | float) -> float:
    """A Kubernetes resource quantity as a number (cores or bytes)."""
    match = _QUANTITY.match(str(value))
    assert match, f"unsupported quantity {value!r}"
    return float(match.group(1)) * _FACTORS[match.group(2)]


def dockerfile_instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of the Dockerfile, continuation lines joined."""
    lines: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    result = []
    for line in lines:
        instruction, _, arguments = line.partition(" ")
        result.append((instruction.upper(), arguments.strip()))
    return result


def final_stage() -> list[tuple[str, str]]:
    """The instructions of the last stage (from its ``FROM`` on)."""
    instructions = dockerfile_instructions()
    start = max(i for i, (name, _) in enumerate(instructions) if name == "FROM")
    return instructions[start:]
