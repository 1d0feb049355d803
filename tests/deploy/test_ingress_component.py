"""``k8s/components/ingress-nginx``: the example Ingress (docs/operations.md, "Behind an
ingress or proxy"), rendered into each overlay by the real kustomize and held to the
Kubernetes schemas, to the Services it names and to the server's limits.

The annotations' values are ingress-nginx's; what the tests hold them to is what the
server needs of the ingress in front: POSTs and 503s retried on other pods, a body limit no
lower than the gateway's, a connection bound per client, gRPC spoken as gRPC.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from service.http_gateway import JSON_BODY_FACTOR, RETRY_AFTER_SECONDS
from tests.deploy.manifests import K8S, ROOT, all_of, one, rendered
from tests.deploy.rendering import Manifest, kustomize
from tests.deploy.test_manifests_valid import VERSIONS, major_minor, validate_k8s
from tests.doc_blocks import fenced_blocks

COMPONENT = "../../components/ingress-nginx"
PREFIX = "nginx.ingress.kubernetes.io/"
#: What the API server takes as an Ingress host or a Secret's name (RFC 1123 subdomain).
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
PLACEHOLDER = "change-me"
#: The annotations that say when nginx sends a call to another pod.
RETRIES = ("proxy-next-upstream", "proxy-next-upstream-tries", "proxy-next-upstream-timeout")
#: nginx's size units (``client_max_body_size``): none, k or m, in either case.
_UNITS = {"": 1, "k": 1024, "m": 1024 * 1024}
#: The time an HTTP caller gives a call in the component's comment: these retries serve
#: HTTP only (a gRPC UNAVAILABLE comes in a 200, which nginx passes on as it is).
HTTP_CALLER_SECONDS = 5


def with_component(tmp_path: Path, overlay: str) -> list[Manifest]:
    """``overlay`` rendered from a copy of ``k8s/`` whose kustomization lists the component."""
    copy = Path(shutil.copytree(K8S, tmp_path / "k8s"))
    with (copy / overlay / "kustomization.yaml").open("a") as kustomization:
        kustomization.write(f"components:\n  - {COMPONENT}\n")
    return kustomize(copy / overlay)


def nginx_bytes(size: str) -> int:
    match = re.fullmatch(r"(\d+)([kKmM]?)", size)
    assert match is not None, f"{size!r} is no nginx size"
    return int(match[1]) * _UNITS[match[2].lower()]


def annotation(ingress: Manifest, name: str) -> str | None:
    value: str | None = ingress["metadata"].get("annotations", {}).get(PREFIX + name)
    return value


def required(ingress: Manifest, name: str) -> str:
    value = annotation(ingress, name)
    assert value is not None, f"{ingress['metadata']['name']} has no {PREFIX}{name}"
    return value


def backend_target_port(objects: list[Manifest], ingress: Manifest) -> str:
    """The container port (by name) the Ingress's one backend reaches, through a Service
    of the render and one of its ports by name."""
    [rule] = ingress["spec"]["rules"]
    [path] = rule["http"]["paths"]
    backend = path["backend"]["service"]
    service = one(objects, "Service", backend["name"])
    [port] = [p for p in service["spec"]["ports"] if p["name"] == backend["port"]["name"]]
    target: str = port["targetPort"]
    return target


@pytest.mark.parametrize("overlay", ["overlays/dev", "overlays/prod"])
def test_the_component_adds_two_valid_ingresses_and_changes_nothing_else(tmp_path, overlay):
    objects = with_component(tmp_path, overlay)
    ingresses = all_of(objects, "Ingress")
    assert sorted(i["metadata"]["name"] for i in ingresses) == ["cardrules-grpc", "cardrules-http"]
    assert [o for o in objects if o["kind"] != "Ingress"] == rendered(overlay)
    namespace = one(objects, "Deployment")["metadata"]["namespace"]
    for ingress in ingresses:
        assert ingress["metadata"]["namespace"] == namespace
        for version in VERSIONS:
            assert validate_k8s(ingress, version) == major_minor(version)


def test_each_ingress_reaches_its_port_and_speaks_its_protocol(tmp_path):
    objects = with_component(tmp_path, "overlays/prod")
    http, grpc = (one(objects, "Ingress", f"cardrules-{name}") for name in ("http", "grpc"))
    assert backend_target_port(objects, http) == "http"
    assert backend_target_port(objects, grpc) == "grpc"
    # Without it nginx speaks HTTP/1.1 to the gRPC port, which answers none.
    assert annotation(grpc, "backend-protocol") == "GRPC"
    assert annotation(http, "backend-protocol") in (None, "HTTP")
    # The gRPC one through the headless Service: nginx balances calls over its endpoints.
    assert grpc["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] == (
        "cardrules-headless"
    )


def test_the_annotations_hold_what_the_server_needs_of_the_ingress(tmp_path):
    objects = with_component(tmp_path, "overlays/prod")
    limit = int(one(objects, "ConfigMap")["data"]["CARDRULES_MAX_REQUEST_BYTES"])
    http, grpc = (one(objects, "Ingress", f"cardrules-{name}") for name in ("http", "grpc"))
    # Every call is safe to send again, so a POST sent to a pod that closed is retried,
    # and so is a pod's 503 (UNAVAILABLE: an older pod in a rolling upgrade).
    assert set(required(http, "proxy-next-upstream").split()) >= {
        "error",
        "http_503",
        "non_idempotent",
    }
    # No lower than the gateway's body limit, or nginx's HTML 413 answers bodies it takes.
    assert nginx_bytes(required(http, "proxy-body-size")) >= JSON_BODY_FACTOR * limit
    assert nginx_bytes(required(grpc, "proxy-body-size")) >= limit
    for ingress in (http, grpc):
        assert int(required(ingress, "limit-connections")) > 0


def smallest_rollout(objects: list[Manifest]) -> int:
    """Pods serving when a rolling update of the HPA's minimum starts its first surge pod:
    the old ones (maxUnavailable 0 keeps them all) and one new."""
    minimum: int = one(objects, "HorizontalPodAutoscaler")["spec"]["minReplicas"]
    update = one(objects, "Deployment")["spec"]["strategy"]["rollingUpdate"]
    assert update["maxUnavailable"] == 0, "old pods leave before new ones serve"
    return minimum + 1


def test_the_http_ingress_passes_a_call_on_until_a_newer_pod_can_serve_it(tmp_path):
    """docs/operations.md, "Behind an ingress or proxy": in a rolling upgrade the old
    pods answer a newer release's tokens 503; ingress-nginx (whose default round_robin
    balancer does not skip pods already tried) must try more pods than its default 3,
    within the time an HTTP caller waits, so that the answer (the new pod's, or the last
    503) comes back in it with time left to wait its Retry-After and send it again."""
    objects = with_component(tmp_path, "overlays/prod")
    http = one(objects, "Ingress", "cardrules-http")
    pods = smallest_rollout(objects)
    assert pods == 4, "the Ingress's comment counts 3 old pods + 1 surge"
    tries = int(required(http, "proxy-next-upstream-tries"))
    # Taken in turn, one try per pod; at random, 1 new pod among 4 missed at most 10%.
    assert tries >= pods
    assert ((pods - 1) / pods) ** tries <= 0.1
    timeout = int(required(http, "proxy-next-upstream-timeout"))
    # 0 is nginx's "no bound"; the 503 must reach a caller with time to retry it.
    assert 0 < timeout + int(RETRY_AFTER_SECONDS) < HTTP_CALLER_SECONDS


def ingress_section() -> str:
    text = (ROOT / "docs" / "operations.md").read_text()
    return text.split("\n## Behind an ingress or proxy\n", 1)[1].split("\n## ", 1)[0]


def nginx_directives(block: str) -> dict[str, str]:
    """``name value;`` lines of an nginx block, by name (the last wins, as one per name)."""
    return dict(re.findall(r"^\s*(\w+) ([^;{]+);$", block, re.MULTILINE))


def test_the_docs_give_the_components_retries_as_annotations_and_as_directives(tmp_path):
    """docs/operations.md shows the retry annotations for ingress-nginx and the same as
    plain nginx's directives, with ``max_fails=0`` (a 503 passed on would otherwise take
    a server out for 10 s): both as the component has them."""
    http = one(with_component(tmp_path, "overlays/prod"), "Ingress", "cardrules-http")
    shipped = {name: required(http, name) for name in RETRIES}
    section = ingress_section()
    [annotations] = [
        block for block in fenced_blocks(section, "yaml") if PREFIX + RETRIES[0] in block
    ]
    documented = yaml.safe_load(annotations)["metadata"]["annotations"]
    assert {name: documented[PREFIX + name] for name in RETRIES} == shipped
    [plain] = fenced_blocks(section, "nginx")
    directives = nginx_directives(plain)
    assert directives["proxy_next_upstream"] == shipped["proxy-next-upstream"]
    assert directives["proxy_next_upstream_tries"] == shipped["proxy-next-upstream-tries"]
    assert directives["proxy_next_upstream_timeout"] == shipped["proxy-next-upstream-timeout"] + "s"
    servers = re.findall(r"^\s*server (\S+.*);$", plain, re.MULTILINE)
    assert servers and all("max_fails=0" in server.split() for server in servers), servers


def test_hosts_and_tls_secrets_are_placeholders_the_api_server_takes(tmp_path):
    for ingress in all_of(with_component(tmp_path, "overlays/prod"), "Ingress"):
        hosts = [rule["host"] for rule in ingress["spec"]["rules"]]
        [tls] = ingress["spec"]["tls"]
        assert tls["hosts"] == hosts
        for name in (*hosts, tls["secretName"]):
            assert PLACEHOLDER in name and DNS_SUBDOMAIN.fullmatch(name), name


def test_nginx_sizes_read_as_nginx_reads_them():
    assert [nginx_bytes(size) for size in ("1m", "1M", "512k", "1048576")] == [
        1048576,
        1048576,
        524288,
        1048576,
    ]
