"""docs/operations.md's one-rollout patch for a release whose state tokens the running
one cannot read ("What the Deployment does"): every new pod at once (``maxSurge:
100%``), and nothing the pods run changes, so taking it out afterwards rolls no pod."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from tests.deploy.manifests import K8S, one, rendered
from tests.deploy.rendering import Manifest, kustomize
from tests.doc_blocks import fenced_blocks

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def _documented_patch() -> list[dict[str, object]]:
    """The YAML block of operations.md that patches ``maxSurge``: an item of ``patches``."""
    (block,) = [
        text for text in fenced_blocks(OPERATIONS.read_text(), "yaml") if "maxSurge" in text
    ]
    patches = yaml.safe_load(block)
    assert isinstance(patches, list), "the block is a list of kustomize patches"
    return patches


def _prod_with(patches: list[dict[str, object]], tmp_path: Path) -> list[Manifest]:
    """The prod overlay rendered with ``patches`` added, as an overlay's ``patches`` hold them."""
    # kustomize takes no absolute path to another kustomization: a relative one.
    prod = os.path.relpath(K8S / "overlays" / "prod", tmp_path)
    kustomization = {"resources": [prod], "patches": patches}
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return kustomize(tmp_path)


def test_the_documented_patch_starts_every_new_pod_at_once(tmp_path):
    prod = one(rendered("overlays/prod"), "Deployment")
    patched = one(_prod_with(_documented_patch(), tmp_path), "Deployment")
    rolling = patched["spec"]["strategy"]["rollingUpdate"]
    assert rolling["maxSurge"] == "100%"
    assert prod["spec"]["strategy"]["rollingUpdate"]["maxSurge"] != "100%", (
        "prod already surges 100%: the docs' one-rollout patch would be needless"
    )
    # Old pods still go only as new ones are ready: the patch changes the surge alone.
    assert rolling["maxUnavailable"] == prod["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"]


def test_the_patch_changes_nothing_the_pods_run(tmp_path):
    """So the apply that takes it out again rolls no pod (operations.md says so)."""
    prod = rendered("overlays/prod")
    patched = _prod_with(_documented_patch(), tmp_path)
    assert (
        one(patched, "Deployment")["spec"]["template"]
        == one(prod, "Deployment")["spec"]["template"]
    )
    others = [item for item in patched if item["kind"] != "Deployment"]
    assert others == [item for item in prod if item["kind"] != "Deployment"]
