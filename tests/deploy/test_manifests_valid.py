"""Every manifest of ``k8s/`` is valid Kubernetes (docs/operations.md, "Checks that run offline").

Kubernetes objects go through kubernetes-validate's strict schemas (unknown
fields rejected) for Kubernetes 1.30 and for the newest version it ships; the
ServiceMonitor and the PrometheusRule go through their CRD schemas (hand-reduced
copies of prometheus-operator's, ``fixtures/servicemonitor-crd.yaml`` and
``fixtures/prometheusrule-crd.yaml``) made strict the same way.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
from kubernetes_validate.utils import SchemaNotFoundError  # type: ignore[import-untyped]

from tests.deploy.manifests import OVERLAYS, example_secret, rendered
from tests.deploy.rendering import Manifest, load_documents

OLDEST_SUPPORTED = "1.30.0"
NEWEST = kubernetes_validate.utils.latest_version()
VERSIONS = (OLDEST_SUPPORTED, NEWEST)
FIXTURES = Path(__file__).with_name("fixtures")
CRDS = (FIXTURES / "servicemonitor-crd.yaml", FIXTURES / "prometheusrule-crd.yaml")


def validate_k8s(item: Manifest, version: str) -> str:
    """Validate ``item`` strictly; the Kubernetes version (``1.30``) whose schema was used."""
    used: str = kubernetes_validate.validate(item, version, strict=True)
    return used


def strict(schema: Any) -> Any:
    """The schema with unknown properties rejected wherever properties are listed.

    The API server prunes unknown fields of a CRD silently; like
    ``kubernetes-validate --strict``, the test turns them into errors.
    """
    if isinstance(schema, dict):
        result = {key: strict(value) for key, value in schema.items()}
        if "properties" in result and "additionalProperties" not in result:
            result["additionalProperties"] = False
        return result
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    return schema


def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """The strict schema of each fixture CRD's version, by (``apiVersion``, ``kind``)."""
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    for path in CRDS:
        (crd,) = load_documents(path)
        for version in crd["spec"]["versions"]:
            api_version = f"{crd['spec']['group']}/{version['name']}"
            schema = strict(version["schema"]["openAPIV3Schema"])
            schemas[api_version, crd["spec"]["names"]["kind"]] = schema
    return schemas


CRD_SCHEMAS = crd_schemas()


def validate_custom(item: Manifest) -> None:
    """Validate a custom resource against its fixture CRD's strict schema."""
    schema = CRD_SCHEMAS[item["apiVersion"], item["kind"]]
    jsonschema.Draft7Validator(schema).validate(item)


def base_object(kind: str) -> Manifest:
    return copy.deepcopy(next(i for i in rendered("base") if i["kind"] == kind))


def major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def test_the_validator_ships_both_versions():
    versions = kubernetes_validate.utils.all_versions()
    assert "1.30.0" in versions
    assert versions[-1] == NEWEST != OLDEST_SUPPORTED


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_object_is_valid(overlay, version):
    objects = rendered(overlay)
    assert len(objects) >= 8
    kinds = {item["kind"] for item in objects}
    assert {
        "Deployment",
        "Service",
        "ConfigMap",
        "HorizontalPodAutoscaler",
        "ServiceMonitor",
        "PrometheusRule",
    } <= kinds
    custom = {kind for _, kind in CRD_SCHEMAS}
    schemas: set[tuple[str, str]] = set()
    for item in objects:
        if (item["apiVersion"], item["kind"]) in CRD_SCHEMAS:
            validate_custom(item)
            schemas.add((item["kind"], "crd"))
        else:
            # The schema of the version asked for, not of an older one it falls back to.
            schemas.add((item["kind"], validate_k8s(item, version)))
    expected = {(kind, "crd" if kind in custom else major_minor(version)) for kind in kinds}
    assert schemas == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_the_example_secret_and_the_crd_fixtures_are_valid(version):
    validate_k8s(example_secret(), version)
    for path in CRDS:
        (crd,) = load_documents(path)
        validate_k8s(crd, version)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_custom_resources_lack_a_kubernetes_schema(overlay):
    """Hence their CRD schemas; the other objects have one (``test_every_rendered_object_is_valid``)."""
    custom = [
        item for item in rendered(overlay) if (item["apiVersion"], item["kind"]) in CRD_SCHEMAS
    ]
    assert sorted(item["kind"] for item in custom) == ["PrometheusRule", "ServiceMonitor"]
    for item in custom:
        with pytest.raises(SchemaNotFoundError):
            validate_k8s(item, NEWEST)


# -- the checks can fail ---------------------------------------------------------------


def test_strict_validation_rejects_an_unknown_field():
    deployment = base_object("Deployment")
    deployment["spec"]["template"]["spec"]["terminationGracePeriod"] = 30
    with pytest.raises(jsonschema.ValidationError):
        validate_k8s(deployment, OLDEST_SUPPORTED)


def test_validation_rejects_a_wrong_type():
    deployment = base_object("Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["grpc"]["port"] = (
        "grpc"  # gRPC probes take a number, not a port name
    )
    with pytest.raises(jsonschema.ValidationError):
        validate_k8s(deployment, OLDEST_SUPPORTED)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda spec: spec["endpoints"][0].update(intervall="15s"), "intervall"),
        (lambda spec: spec["endpoints"][0].update(interval="15 seconds"), "15 seconds"),
        (lambda spec: spec["endpoints"][0].update(scheme="grpc"), "grpc"),
        (lambda spec: spec.pop("selector"), "selector"),
        (lambda spec: spec["selector"].update(matchLabels={"app": 1}), "1"),
    ],
)
def test_the_crd_schema_rejects_bad_servicemonitors(change, expected):
    monitor = base_object("ServiceMonitor")
    validate_custom(monitor)
    change(monitor["spec"])
    with pytest.raises(jsonschema.ValidationError, match=expected):
        validate_custom(monitor)


def first_rule(group: dict[str, Any]) -> dict[str, Any]:
    rule: dict[str, Any] = group["rules"][0]
    return rule


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda group: first_rule(group).update(fore="10m"), "fore"),
        (lambda group: first_rule(group).update({"for": "10 minutes"}), "10 minutes"),
        (lambda group: first_rule(group).update(keep_firing_for="5m"), "keep_firing_for"),
        (lambda group: first_rule(group).pop("expr"), "expr"),
        (lambda group: first_rule(group)["labels"].update(severity=1), "1"),
        (lambda group: first_rule(group)["annotations"].update(runbook=["a"]), "'a'"),
        (lambda group: group.update(name=""), "non-empty"),
        (lambda group: group.update(interval="1m"), "interval"),
    ],
)
def test_the_crd_schema_rejects_bad_prometheus_rules(change, expected):
    rules = base_object("PrometheusRule")
    validate_custom(rules)
    change(rules["spec"]["groups"][0])
    with pytest.raises(jsonschema.ValidationError, match=expected):
        validate_custom(rules)
