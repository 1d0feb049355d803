"""``k8s/components/istio-sidecar``, ``istio-ambient`` and ``linkerd`` (docs/operations.md,
"Behind a service mesh"), rendered into the prod overlay by the real kustomize and held
to the Kubernetes schemas, to what each mesh needs of the NetworkPolicy and to the
server's own stop; and the ClusterIP Service's gRPC port that mesh clients call.

No mesh runs here: what the tests hold the components to is the meshes' documented
ports, namespaces and shutdown order. The NetworkPolicy is read as the API defines it
(a connection is admitted when some rule's peers and ports both match), by a small
evaluator that the last tests show can refuse.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.manifests import (
    K8S,
    ROOT,
    all_of,
    container,
    container_ports,
    effective_config,
    manifest_env,
    one,
    pre_stop_seconds,
    rendered,
)
from tests.deploy.rendering import Manifest, kustomize
from tests.deploy.test_manifests_match_server import PROBES, SECRETS, STOP_MARGIN_SECONDS
from tests.deploy.test_manifests_valid import (
    CRD_SCHEMAS,
    VERSIONS,
    major_minor,
    validate_custom,
    validate_k8s,
)
from tests.doc_blocks import fenced_blocks

OVERLAY = "overlays/prod"
NAMESPACE_LABEL = "kubernetes.io/metadata.name"
#: The labels the shipped policy admits clients by (k8s/base/networkpolicy.yaml).
CLIENT_NAMESPACE_LABELS = {"cardrules.io/client": "true"}
MONITORING = "monitoring"
#: The cluster DNS's pods, as kubeadm, GKE and EKS label CoreDNS.
DNS_POD = ("kube-system", {"k8s-app": "kube-dns"})
DNS_PORTS = (("UDP", 53), ("TCP", 53))
#: Istio ambient's source address of the kubelet's probes (ztunnel tells them by it).
AMBIENT_PROBE_SOURCE = "169.254.7.127"
ISTIO_DRAIN = "proxy.istio.io/config"
LINKERD_WAIT = "config.alpha.linkerd.io/proxy-wait-before-exit-seconds"


@dataclasses.dataclass(frozen=True)
class Mesh:
    """What one mesh needs of the pod: its proxy's egress (to a pod of a namespace, by
    protocol and port), the port meshed calls arrive on, its own metrics ports and
    their scrapers' namespace, and the annotation that holds a proxy in the pod alive."""

    component: str
    egress: tuple[tuple[str, Mapping[str, str], str, int], ...]
    inbound_port: int | None
    proxy_metrics: tuple[str, tuple[int, ...]] | None
    drain_annotation: str | None


MESHES = {
    "istio-sidecar": Mesh(
        component="istio-sidecar",
        # istiod's xDS and certificates over mTLS, and DNS to find istiod.
        egress=(
            ("istio-system", {"app": "istiod"}, "TCP", 15012),
            *((*DNS_POD, protocol, port) for protocol, port in DNS_PORTS),
        ),
        inbound_port=None,  # the sidecar takes calls on the port they were sent to
        proxy_metrics=(MONITORING, (15020, 15090)),
        drain_annotation=ISTIO_DRAIN,
    ),
    "istio-ambient": Mesh(
        component="istio-ambient",
        egress=(),  # ztunnel talks to istiod from its own pod
        inbound_port=15008,  # HBONE
        proxy_metrics=None,
        drain_annotation=None,  # nothing of the mesh's in the pod
    ),
    "linkerd": Mesh(
        component="linkerd",
        # identity, destination, policy; and DNS to find them.
        egress=(
            ("linkerd", {"linkerd.io/control-plane-component": "identity"}, "TCP", 8080),
            ("linkerd", {"linkerd.io/control-plane-component": "destination"}, "TCP", 8086),
            ("linkerd", {"linkerd.io/control-plane-component": "destination"}, "TCP", 8090),
            *((*DNS_POD, protocol, port) for protocol, port in DNS_PORTS),
        ),
        inbound_port=4143,  # the proxy's inbound port, which meshed clients send to
        proxy_metrics=("linkerd-viz", (4191, 4190)),
        drain_annotation=LINKERD_WAIT,
    ),
}


def with_components(tmp_path: Path, *components: str, extra: str = "") -> list[Manifest]:
    """The prod overlay rendered from a copy of ``k8s/`` whose kustomization lists
    ``components`` (and ``extra``, more of the kustomization's text)."""
    copy = Path(shutil.copytree(K8S, tmp_path / "k8s"))
    listed = "".join(f"  - ../../components/{name}\n" for name in components)
    with (copy / OVERLAY / "kustomization.yaml").open("a") as kustomization:
        kustomization.write(f"components:\n{listed}{extra}")
    return kustomize(copy / OVERLAY)


# -- a NetworkPolicy's reading (networking.k8s.io/v1) -------------------------------------


@dataclasses.dataclass(frozen=True)
class Peer:
    """One end of a connection: a pod (its namespace's labels and its own) or an address
    outside every pod (a node, the kubelet's ambient source)."""

    namespace_labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    pod_labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    address: str | None = None


def pod_in(
    namespace: str,
    labels: Mapping[str, str] | None = None,
    namespace_labels: Mapping[str, str] | None = None,
) -> Peer:
    """A pod of ``namespace``, whose labels always include its name (Kubernetes 1.22+)."""
    return Peer({**(namespace_labels or {}), NAMESPACE_LABEL: namespace}, dict(labels or {}))


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A label selector of matchLabels alone (the only form the manifests use)."""
    assert set(selector) <= {"matchLabels"}, f"unsupported selector {selector}"
    return dict(selector.get("matchLabels", {})).items() <= dict(labels).items()


def peer_matches(rule_peer: Mapping[str, Any], peer: Peer, own_namespace: str) -> bool:
    if "ipBlock" in rule_peer:
        block = rule_peer["ipBlock"]
        inside = peer.address is not None and ipaddress.ip_address(
            peer.address
        ) in ipaddress.ip_network(block["cidr"])
        return inside and not any(
            ipaddress.ip_address(peer.address or "") in ipaddress.ip_network(cidr)
            for cidr in block.get("except", [])
        )
    if peer.address is not None:
        return False
    if "namespaceSelector" in rule_peer:
        namespace_ok = selects(rule_peer["namespaceSelector"], peer.namespace_labels)
    else:  # a podSelector alone means the policy's own namespace
        namespace_ok = peer.namespace_labels.get(NAMESPACE_LABEL) == own_namespace
    return namespace_ok and selects(rule_peer.get("podSelector", {}), peer.pod_labels)


def port_matches(rule: Mapping[str, Any], protocol: str, port: int) -> bool:
    if "ports" not in rule:
        return True
    return any(
        entry.get("protocol", "TCP") == protocol and entry.get("port") in (None, port)
        for entry in rule["ports"]
    )


def admits(policy: Manifest, direction: str, peer: Peer, protocol: str, port: int) -> bool:
    """Whether ``policy`` lets a connection between its pods and ``peer`` through:
    ``direction`` ``ingress`` (from the peer) or ``egress`` (to it), on ``port``."""
    side = "from" if direction == "ingress" else "to"
    own = policy["metadata"]["namespace"]
    return any(
        port_matches(rule, protocol, port)
        and (side not in rule or any(peer_matches(p, peer, own) for p in rule[side]))
        for rule in policy["spec"].get(direction, [])
    )


def admitted_ports(policy: Manifest, peer: Peer) -> set[int]:
    """Every TCP port number the policy names that ``peer`` may open a connection to."""
    named = {p["port"] for rule in policy["spec"]["ingress"] for p in rule.get("ports", [])}
    return {port for port in named if admits(policy, "ingress", peer, "TCP", port)}


# -- the components -----------------------------------------------------------------------


@pytest.mark.parametrize("name", MESHES)
def test_each_component_renders_valid_objects_and_changes_only_the_policy_and_the_pod(
    tmp_path, name
):
    objects = with_components(tmp_path, name)
    without = rendered(OVERLAY)
    for item in objects:
        if (item["apiVersion"], item["kind"]) in CRD_SCHEMAS:
            validate_custom(item)
            continue
        for version in VERSIONS:
            assert validate_k8s(item, version) == major_minor(version)
    unchanged = [o for o in objects if o["kind"] not in ("NetworkPolicy", "Deployment")]
    assert unchanged == [o for o in without if o["kind"] not in ("NetworkPolicy", "Deployment")]
    deployment, before = one(objects, "Deployment"), one(without, "Deployment")
    added = deployment["spec"]["template"]["metadata"].pop("annotations", {})
    assert deployment == before, "the component changes only the pod's annotations"
    assert set(added) == ({MESHES[name].drain_annotation} - {None})


@pytest.mark.parametrize("name", MESHES)
def test_every_namespace_the_components_name_is_named_by_its_name_label(tmp_path, name):
    """The meshes' namespaces by ``kubernetes.io/metadata.name``, which Kubernetes sets on
    every namespace: no label for the operator to add, and none a client can take."""
    policy = one(with_components(tmp_path, name), "NetworkPolicy")
    shipped = peers(one(rendered(OVERLAY), "NetworkPolicy"))
    added = [peer for peer in peers(policy) if peer not in shipped and "namespaceSelector" in peer]
    assert added or name == "istio-ambient"  # ambient adds an ipBlock alone
    for peer in added:
        assert set(peer["namespaceSelector"]["matchLabels"]) == {NAMESPACE_LABEL}, peer


def peers(policy: Manifest) -> list[dict[str, Any]]:
    """Every peer of every rule, ingress and egress."""
    return [
        peer
        for direction, side in (("ingress", "from"), ("egress", "to"))
        for rule in policy["spec"][direction]
        for peer in rule.get(side, [])
    ]


@pytest.mark.parametrize("name", MESHES)
def test_the_policy_lets_the_proxy_reach_its_control_plane_and_dns(tmp_path, name):
    """istio/istio#32945: a sidecar held to a deny-all egress never gets its configuration,
    and the pod never becomes Ready. Without the component the shipped policy allows none
    of it, and with it nothing else."""
    mesh = MESHES[name]
    policy = one(with_components(tmp_path, name), "NetworkPolicy")
    shipped = one(rendered(OVERLAY), "NetworkPolicy")
    for namespace, labels, protocol, port in mesh.egress:
        target = pod_in(namespace, labels)
        assert admits(policy, "egress", target, protocol, port), (namespace, port)
        assert not admits(shipped, "egress", target, protocol, port)
    # Nowhere else: not the internet, not a client's namespace, not the mesh on other ports.
    for target, port in (
        (Peer(address="203.0.113.7"), 443),
        (pod_in("games", namespace_labels=CLIENT_NAMESPACE_LABELS), 50051),
        *((pod_in(ns, labels), 15010) for ns, labels, _, _ in mesh.egress),
    ):
        assert not admits(policy, "egress", target, "TCP", port), (target, port)


@pytest.mark.parametrize("name", MESHES)
def test_meshed_calls_reach_the_pod_from_the_clients_alone(tmp_path, name):
    """The port meshed calls arrive on (HBONE 15008, Linkerd's 4143) reaches every port of
    the pod, so it is admitted from exactly the peers the server's ports are, and not from
    the monitoring namespace, which may scrape 9464 only."""
    mesh = MESHES[name]
    objects = with_components(tmp_path, name)
    policy = one(objects, "NetworkPolicy")
    ports = container_ports(objects)
    served = {ports["grpc"], ports["http"]}
    expected = served | ({mesh.inbound_port} - {None})
    for client in (
        pod_in(policy["metadata"]["namespace"], {"app": "backend"}),
        pod_in("games", namespace_labels=CLIENT_NAMESPACE_LABELS),
    ):
        assert admitted_ports(policy, client) == expected
    # Scrapers reach the metrics ports alone: the server's from monitoring, the proxy's
    # from its own scraper's namespace.
    scraper, proxy_ports = mesh.proxy_metrics or (MONITORING, ())
    for namespace in {MONITORING, scraper}:
        server_metrics = {ports["metrics"]} if namespace == MONITORING else set()
        proxy_metrics = set(proxy_ports) if namespace == scraper else set()
        assert admitted_ports(policy, pod_in(namespace)) == server_metrics | proxy_metrics
    assert admitted_ports(policy, pod_in("elsewhere")) == set()


def probe_ports(objects: list[Manifest]) -> set[int]:
    spec = container(objects)
    return {spec[kind]["grpc"]["port"] for kind in PROBES}


def test_the_ambient_policy_admits_the_kubelets_probes_to_their_port_only(tmp_path):
    """Under ambient the kubelet's probes come from 169.254.7.127, not from the node, so
    the node's exemption does not cover them: without the rule the startup probe fails."""
    objects = with_components(tmp_path, "istio-ambient")
    policy = one(objects, "NetworkPolicy")
    kubelet = Peer(address=AMBIENT_PROBE_SOURCE)
    assert admitted_ports(policy, kubelet) == probe_ports(objects)
    shipped = one(rendered(OVERLAY), "NetworkPolicy")
    assert admitted_ports(shipped, kubelet) == set()
    assert admitted_ports(policy, Peer(address="169.254.7.128")) == set()


def proxy_seconds(annotations: Mapping[str, str], key: str) -> float:
    """How long the annotation keeps the proxy serving after the pod's stop begins."""
    value = annotations[key]
    if key == ISTIO_DRAIN:
        duration = json.loads(value)["terminationDrainDuration"]
        match = re.fullmatch(r"(\d+)s", duration)
        assert match is not None, f"{duration!r}: whole seconds, as the component writes it"
        return float(match[1])
    return float(value)


@pytest.mark.parametrize("name", [name for name, mesh in MESHES.items() if mesh.drain_annotation])
def test_the_proxy_outlasts_the_servers_stop_within_the_grace_period(tmp_path, name):
    """A classic sidecar hears SIGTERM as the server's preStop sleep begins: it must serve
    on through that sleep, the drain delay, the grace and the exit, and the kubelet must
    not kill the pod before it is done (docs/operations.md, "Behind a service mesh")."""
    objects = with_components(tmp_path, name)
    pod = one(objects, "Deployment")["spec"]["template"]
    config = effective_config(manifest_env(objects, SECRETS))
    server_stop = (
        pre_stop_seconds(objects)
        + config.drain_delay_seconds
        + config.grace_seconds
        + STOP_MARGIN_SECONDS
    )
    proxy = proxy_seconds(pod["metadata"]["annotations"], MESHES[name].drain_annotation or "")
    assert server_stop < proxy < pod["spec"]["terminationGracePeriodSeconds"]


def test_the_components_can_be_listed_with_the_ingress_one(tmp_path):
    """An overlay may list a mesh's component beside ingress-nginx's: they patch apart."""
    for name in MESHES:
        objects = with_components(tmp_path / name, name, "ingress-nginx")
        assert len(all_of(objects, "Ingress")) == 2


# -- the ClusterIP Service's gRPC port -----------------------------------------------------


@pytest.mark.parametrize("overlay", ["base", "overlays/dev", OVERLAY])
def test_the_cluster_ip_service_serves_grpc_on_the_servers_port(overlay):
    """A mesh balances calls only to a Service's address: its clients call
    ``cardrules:50051``, which must reach the port the server listens on, and say gRPC as
    the headless Service does."""
    objects = rendered(overlay)
    config = effective_config(manifest_env(objects, SECRETS))
    service = one(objects, "Service", "cardrules")
    assert service["spec"]["type"] == "ClusterIP"
    [grpc] = [port for port in service["spec"]["ports"] if port["name"] == "grpc"]
    assert grpc["port"] == container_ports(objects)[grpc["targetPort"]] == config.grpc_port
    [headless] = one(objects, "Service", "cardrules-headless")["spec"]["ports"]
    assert {k: grpc[k] for k in ("name", "appProtocol", "protocol", "targetPort")} == {
        k: headless[k] for k in ("name", "appProtocol", "protocol", "targetPort")
    }


# -- the docs --------------------------------------------------------------------------------


def mesh_section() -> str:
    text = (ROOT / "docs" / "operations.md").read_text()
    return text.split("\n## Behind a service mesh\n", 1)[1].split("\n## ", 1)[0]


def documented_settings(text: str) -> dict[str, Any]:
    """The ``key: value`` spans of the text in backticks, each read as YAML."""
    settings: dict[str, Any] = {}
    for span in re.findall(r"`([\w./-]+: [^`]+)`", " ".join(text.split())):
        settings.update(yaml.safe_load(span))
    return settings


def test_the_docs_give_the_annotations_the_components_set(tmp_path):
    section = mesh_section()
    documented = documented_settings(section)
    for name in ("istio-sidecar", "linkerd"):
        template = one(with_components(tmp_path / name, name), "Deployment")["spec"]["template"]
        annotations = template["metadata"]["annotations"]
        assert annotations.items() <= documented.items(), annotations
    for name in MESHES:
        assert f"`{name}`" in section, name


def test_the_docs_patch_for_linkerds_native_sidecars_removes_the_wait(tmp_path):
    """Linkerd says not to combine wait-before-exit with native sidecars; the docs' patch,
    put in the overlay's patches, takes it out and leaves the rest of the component."""
    [patch] = [
        block
        for block in fenced_blocks(mesh_section(), "yaml")
        if "proxy-wait-before-exit-seconds" in block
    ]
    entries = yaml.safe_load(patch)
    objects = with_components(tmp_path, "linkerd", extra=yaml.safe_dump({"patches": entries}))
    annotations = one(objects, "Deployment")["spec"]["template"]["metadata"]
    assert LINKERD_WAIT not in annotations.get("annotations", {})
    assert admits(
        one(objects, "NetworkPolicy"),
        "egress",
        pod_in("linkerd", {"linkerd.io/control-plane-component": "identity"}),
        "TCP",
        8080,
    )


# -- the evaluator can refuse ----------------------------------------------------------------


def test_the_policy_reading_refuses_what_the_shipped_policy_does_not_name():
    policy = one(rendered(OVERLAY), "NetworkPolicy")
    own = policy["metadata"]["namespace"]
    assert admitted_ports(policy, pod_in(own)) == {50051, 8080}
    assert admitted_ports(policy, pod_in("games")) == set()  # no client label
    assert admitted_ports(policy, pod_in(MONITORING)) == {9464}
    assert admitted_ports(policy, Peer(address="10.0.0.1")) == set()
    assert not admits(policy, "egress", pod_in(own), "TCP", 50051)  # egress: []
    assert not admits(policy, "ingress", pod_in(own), "UDP", 50051)
