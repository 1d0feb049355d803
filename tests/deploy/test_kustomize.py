"""The test renderer of ``k8s/`` (tests/deploy/kustomize.py) and what the overlays change.

The renderer was checked once against ``kubectl kustomize`` (kustomize v5.8.1)
on base, dev and prod with identical results; these tests pin its semantics
and that it refuses what it does not implement.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.kustomize import PatchError, UnsupportedError, apply_json6902, render
from tests.deploy.manifests import OVERLAYS, container, one, rendered


def write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


CONFIG_MAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  LEVEL: info
"""


def test_json6902_operations():
    document = {"a": {"list": [1, 2], "key": "value"}, "x~/y": 1}
    result = apply_json6902(
        document,
        [
            {"op": "add", "path": "/a/list/-", "value": 3},
            {"op": "add", "path": "/a/list/0", "value": 0},
            {"op": "replace", "path": "/a/key", "value": {"nested": True}},
            {"op": "remove", "path": "/a/list/1"},
            {"op": "test", "path": "/x~0~1y", "value": 1},
            {"op": "add", "path": "/b", "value": []},
        ],
    )
    assert result == {"a": {"list": [0, 2, 3], "key": {"nested": True}}, "x~/y": 1, "b": []}
    assert document == {"a": {"list": [1, 2], "key": "value"}, "x~/y": 1}  # not modified


@pytest.mark.parametrize(
    "operation",
    [
        {"op": "replace", "path": "/a/missing", "value": 1},
        {"op": "remove", "path": "/a/list/2"},
        {"op": "add", "path": "/nothing/here", "value": 1},
        {"op": "test", "path": "/a/list/0", "value": 9},
        {"op": "replace", "path": "a/list", "value": 1},
    ],
)
def test_json6902_refuses_what_does_not_apply(operation):
    with pytest.raises(PatchError):
        apply_json6902({"a": {"list": [1, 2]}}, [operation])


def test_an_overlay_patches_sets_namespace_and_images(tmp_path):
    write(
        tmp_path,
        {
            "base/kustomization.yaml": "resources: [settings.yaml]\n",
            "base/settings.yaml": CONFIG_MAP,
            "overlay/kustomization.yaml": """\
namespace: games
resources: [../base]
patches:
  - target: {kind: ConfigMap, name: settings}
    patch: |-
      - op: replace
        path: /data/LEVEL
        value: debug
""",
        },
    )
    (config_map,) = render(tmp_path / "overlay")
    assert config_map["metadata"] == {"name": "settings", "namespace": "games"}
    assert config_map["data"] == {"LEVEL": "debug"}


@pytest.mark.parametrize(
    ("kustomization", "error"),
    [
        ("resources: [settings.yaml]\nnamePrefix: x-\n", UnsupportedError),
        ("resources: [settings.yaml]\nconfigMapGenerator: []\n", UnsupportedError),
        (
            "resources: [settings.yaml]\npatches:\n  - target: {kind: ConfigMap}\n"
            "    patch: |-\n      data: {LEVEL: debug}\n",
            UnsupportedError,  # a strategic merge patch
        ),
        (
            "resources: [settings.yaml]\npatches:\n  - target: {kind: Secret}\n    patch: '[]'\n",
            PatchError,  # selects nothing
        ),
    ],
)
def test_the_renderer_refuses_what_it_does_not_implement(tmp_path, kustomization, error):
    write(tmp_path, {"kustomization.yaml": kustomization, "settings.yaml": CONFIG_MAP})
    with pytest.raises(error):
        render(tmp_path)


def test_images_take_a_new_name_tag_or_digest(tmp_path):
    deployment = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: app}
spec:
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: a}}
    spec:
      containers:
        - {name: a, image: "localhost:5000/app:1"}
        - {name: b, image: other}
"""
    images = {
        "newTag: '2'": ["localhost:5000/app:2", "other"],
        "newName: reg/app": ["reg/app:1", "other"],
        "digest: 'sha256:abc'": ["localhost:5000/app@sha256:abc", "other"],
    }
    for change, expected in images.items():
        write(
            tmp_path,
            {
                "kustomization.yaml": "resources: [d.yaml]\nimages:\n"
                f"  - name: localhost:5000/app\n    {change}\n",
                "d.yaml": deployment,
            },
        )
        (rendered_deployment,) = render(tmp_path)
        containers = rendered_deployment["spec"]["template"]["spec"]["containers"]
        assert [c["image"] for c in containers] == expected, change


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
