"""A small kustomize renderer for exactly the features ``k8s/`` uses.

No kustomize binary is available offline here, so the tests render the
overlays with this. It supports, with kustomize's semantics:

- ``resources``: YAML files (one or more documents) and directories holding a
  ``kustomization.yaml``, in order;
- ``namespace``: set on every rendered object;
- ``images``: ``name`` with ``newName``, ``newTag`` or ``digest`` on the
  containers of Deployments;
- ``patches`` whose patch is a JSON 6902 operation list (``add``, ``replace``,
  ``remove``, ``test``), inline (``patch``) or from a file (``path``), applied to
  every object that its ``target`` (``kind``, ``name``, optional ``group``,
  ``version``, ``namespace``) selects.

Anything else (strategic merge patches, generators, ``namePrefix``, labels
transformers, ...) raises :class:`UnsupportedError` instead of being ignored,
so the manifests cannot silently outgrow the renderer.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

Manifest = dict[str, Any]

KUSTOMIZATION = "kustomization.yaml"
_SUPPORTED = frozenset({"apiVersion", "kind", "resources", "namespace", "images", "patches"})
_TARGET_KEYS = frozenset({"kind", "name", "group", "version", "namespace"})


class UnsupportedError(ValueError):
    """The kustomization uses a feature this renderer does not implement."""


class PatchError(ValueError):
    """A JSON 6902 operation that cannot apply (missing path, failed test)."""


def render(directory: Path) -> list[Manifest]:
    """The objects ``kustomize build directory`` would print (in resource order)."""
    kustomization = _load_kustomization(directory)
    objects: list[Manifest] = []
    for entry in kustomization.get("resources", []):
        path = directory / entry
        if path.is_dir():
            objects.extend(render(path))
        else:
            objects.extend(load_documents(path))
    if "namespace" in kustomization:
        for item in objects:
            item.setdefault("metadata", {})["namespace"] = kustomization["namespace"]
    for image in kustomization.get("images", []):
        _set_image(objects, image)
    for patch in kustomization.get("patches", []):
        _apply_patch(directory, objects, patch)
    return objects


def load_documents(path: Path) -> list[Manifest]:
    """The non-empty YAML documents of a file, each a mapping."""
    documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    for doc in documents:
        if not isinstance(doc, dict):
            raise ValueError(f"{path}: a document is not a mapping")
    return documents


def _load_kustomization(directory: Path) -> Manifest:
    path = directory / KUSTOMIZATION
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a mapping")
    unknown = set(data) - _SUPPORTED
    if unknown:
        raise UnsupportedError(f"{path}: unsupported fields {sorted(unknown)}")
    return data


def _set_image(objects: list[Manifest], image: Mapping[str, Any]) -> None:
    unknown = set(image) - {"name", "newName", "newTag", "digest"}
    if unknown:
        raise UnsupportedError(f"images: unsupported fields {sorted(unknown)}")
    for item in objects:
        if item.get("kind") != "Deployment":
            continue
        pod = item["spec"]["template"]["spec"]
        for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
            name, tag, digest = _split_image(container["image"])
            if name != image["name"]:
                continue
            name = image.get("newName", name)
            if "digest" in image:
                container["image"] = f"{name}@{image['digest']}"
            elif "newTag" in image:
                container["image"] = f"{name}:{image['newTag']}"
            else:
                suffix = f"@{digest}" if digest else f":{tag}" if tag else ""
                container["image"] = name + suffix


def _split_image(reference: str) -> tuple[str, str, str]:
    """``name``, ``tag``, ``digest`` of an image reference (a registry port is no tag)."""
    reference, _, digest = reference.partition("@")
    slash = reference.rfind("/")
    colon = reference.rfind(":")
    if colon > slash:
        return reference[:colon], reference[colon + 1 :], digest
    return reference, "", digest


def _apply_patch(directory: Path, objects: list[Manifest], patch: Mapping[str, Any]) -> None:
    unknown = set(patch) - {"target", "patch", "path"}
    if unknown or "target" not in patch or ("patch" in patch) == ("path" in patch):
        raise UnsupportedError(f"patches: need target and one of patch/path: {dict(patch)}")
    target = patch["target"]
    if set(target) - _TARGET_KEYS:
        raise UnsupportedError(f"patch target: unsupported fields {sorted(set(target))}")
    text = patch["patch"] if "patch" in patch else (directory / patch["path"]).read_text()
    operations = yaml.safe_load(text)
    if not isinstance(operations, list):
        raise UnsupportedError("only JSON 6902 patches (a list of operations) are supported")
    matched = [item for item in objects if _selects(target, item)]
    if not matched:
        raise PatchError(f"patch target {dict(target)} selects nothing")
    for item in matched:
        patched = apply_json6902(item, operations)
        item.clear()
        item.update(patched)


def _selects(target: Mapping[str, Any], item: Manifest) -> bool:
    group, _, version = item.get("apiVersion", "").rpartition("/")
    actual = {
        "kind": item.get("kind"),
        "name": item.get("metadata", {}).get("name"),
        "namespace": item.get("metadata", {}).get("namespace"),
        "group": group,
        "version": version,
    }
    return all(actual[key] == value for key, value in target.items())


def apply_json6902(document: Manifest, operations: list[Any]) -> Manifest:
    """RFC 6902 ``add``, ``replace``, ``remove`` and ``test`` on a copy of ``document``."""
    result = copy.deepcopy(document)
    for operation in operations:
        op, path = operation["op"], operation["path"]
        parent, key = _resolve_parent(result, path)
        if op == "add":
            value = copy.deepcopy(operation["value"])
            if isinstance(parent, list):
                parent.insert(len(parent) if key == "-" else _index(parent, key, path, 1), value)
            else:
                parent[key] = value
        elif op in ("replace", "remove", "test"):
            if isinstance(parent, list):
                index = _index(parent, key, path, 0)
                current = parent[index]
            elif key in parent:
                current = parent[key]
            else:
                raise PatchError(f"{op} {path}: no such member")
            if op == "replace":
                parent[index if isinstance(parent, list) else key] = copy.deepcopy(
                    operation["value"]
                )
            elif op == "remove":
                del parent[index if isinstance(parent, list) else key]
            elif current != operation["value"]:
                raise PatchError(f"test {path}: {current!r} != {operation['value']!r}")
        else:
            raise UnsupportedError(f"JSON 6902 op {op!r} is not supported")
    return result


def _resolve_parent(document: Any, path: str) -> tuple[Any, str]:
    if not path.startswith("/"):
        raise PatchError(f"{path!r} is not a JSON pointer")
    tokens = [token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/")]
    node = document
    for token in tokens[:-1]:
        if isinstance(node, list):
            node = node[_index(node, token, path, 0)]
        elif isinstance(node, dict) and token in node:
            node = node[token]
        else:
            raise PatchError(f"{path}: {token!r} does not exist")
    if not isinstance(node, dict | list):
        raise PatchError(f"{path}: the parent is not a container")
    return node, tokens[-1]


def _index(items: list[Any], token: str, path: str, slack: int) -> int:
    """A list index from a pointer token; ``slack`` 1 allows the end (for ``add``)."""
    if not token.isdigit() or int(token) >= len(items) + slack:
        raise PatchError(f"{path}: {token!r} is not an index of a list of {len(items)}")
    return int(token)
