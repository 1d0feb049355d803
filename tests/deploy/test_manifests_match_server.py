"""The manifests and the image fit the server (docs/operations.md, "Checks that run offline").

Names, ports and settings come from the server's own code (service/config.py,
service/server.py, service/supervisor.py) at test time, and the probes are asked of a real
``cardrules serve`` started with the manifests' environment.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shlex
import signal
import subprocess
import sys
import tomllib
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2

from service.config import ServerConfig
from service.server import DRAINED_ON_SHUTDOWN, HEALTH_SERVICES
from service.supervisor import STOP_MARGIN_SECONDS as SUPERVISOR_STOP_MARGIN_SECONDS
from service.tokens import KeyRing
from tests.deploy.manifests import (
    CONFIG_PREFIX,
    DOCKERFILE,
    OVERLAYS,
    ROOT,
    accepted_env_names,
    all_of,
    config_fields,
    container,
    container_ports,
    effective_config,
    example_secret,
    final_stage,
    loopback_args,
    manifest_env,
    manifest_env_names,
    one,
    pre_stop_seconds,
    quantity,
    rendered,
)
from tests.service.grpc_helpers import health
from tests.service.metrics_helpers import metric_samples
from tests.service.server_process import (
    CARDRULES,
    TEST_KEY,
    free_port,
    server_environment,
    start_server,
)

SECRETS = {"CARDRULES_STATE_KEYS": TEST_KEY}
DESIGN_HTTP_PORT = 8080  # design section 6: HTTP/JSON on 8080
#: The kubelet's sleep before SIGTERM, while the endpoint removal reaches every
#: kube-proxy and client resolver (docs/operations.md, "What the Deployment does").
MIN_PRE_STOP_SECONDS = 5


PROBES = ("startupProbe", "livenessProbe", "readinessProbe")


def probes(overlay: str) -> dict[str, dict[str, Any]]:
    spec = container(rendered(overlay))
    return {kind: spec[kind] for kind in PROBES}


# -- configuration names and values ------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_cardrules_variable_is_one_the_server_reads(overlay):
    names = {name for name in manifest_env_names(rendered(overlay)) if name.startswith("CARDRULES")}
    assert names, "the manifests configure nothing"
    assert names <= accepted_env_names(), names - accepted_env_names()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_manifest_values_parse_to_one_worker_with_sealed_state(overlay):
    environ = manifest_env(rendered(overlay), SECRETS)
    config = effective_config(environ)
    assert config.workers == 1  # one process per pod; scale pods (design section 6)
    assert config.state_keys == TEST_KEY and not config.plain_state
    assert config.log_format == "json"
    for name, value in environ.items():
        if name.startswith(CONFIG_PREFIX) and name != "CARDRULES_STATE_KEYS":
            current = getattr(config, name.removeprefix(CONFIG_PREFIX).lower())
            assert not isinstance(current, bool), name  # bool("false") would be True
            assert current == type(current)(value), name


def test_the_state_keys_come_from_the_secret_the_example_describes():
    (entry,) = [
        e for e in container(rendered("base"))["env"] if e["name"] == "CARDRULES_STATE_KEYS"
    ]
    reference = entry["valueFrom"]["secretKeyRef"]
    secret = example_secret()
    assert secret["metadata"]["name"] == reference["name"]
    assert reference["key"] in secret["stringData"]
    assert reference.get("optional") is not True  # no key: the pod must not start on a made-up one
    with pytest.raises(ValueError):  # a placeholder, not key material
        KeyRing.parse(secret["stringData"][reference["key"]])
    for overlay in OVERLAYS:
        assert all_of(rendered(overlay), "Secret") == []  # real keys never live in the repo


# -- ports -------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_container_ports_are_the_servers_ports(overlay):
    objects = rendered(overlay)
    ports = container_ports(objects)
    config = effective_config(manifest_env(objects, SECRETS))
    assert ports["grpc"] == config.grpc_port
    assert ports["metrics"] == config.metrics_port != 0
    if "http_port" in config_fields():
        assert ports["http"] == dataclasses.asdict(config)["http_port"]
    else:
        # No gateway yet: the port is reserved where design section 6 puts it, and
        # no manifest sets a variable the server would not read (tested above).
        assert ports["http"] == DESIGN_HTTP_PORT
        assert "CARDRULES_HTTP_PORT" not in manifest_env_names(objects)
    for probe in probes(overlay).values():
        assert probe["grpc"]["port"] == config.grpc_port


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_services_route_to_named_container_ports(overlay):
    objects = rendered(overlay)
    ports = container_ports(objects)
    labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    services = {item["metadata"]["name"]: item for item in all_of(objects, "Service")}
    for service in services.values():
        assert service["spec"]["selector"].items() <= labels.items()
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in ports, port
            assert port["port"] == ports[port["targetPort"]]
    headless = [s for s in services.values() if s["spec"].get("clusterIP") == "None"]
    cluster_ip = [s for s in services.values() if s["spec"].get("clusterIP") != "None"]
    assert [p["targetPort"] for s in headless for p in s["spec"]["ports"]] == ["grpc"]
    # gRPC on the ClusterIP too, for a mesh's clients (docs/operations.md, "Behind a
    # service mesh"): a sidecar balances calls only to a Service's address.
    assert sorted(p["targetPort"] for s in cluster_ip for p in s["spec"]["ports"]) == [
        "grpc",
        "http",
        "metrics",
    ]
    monitor = one(objects, "ServiceMonitor")
    selector = monitor["spec"]["selector"]["matchLabels"]
    scraped = [
        port
        for service in services.values()
        if selector.items() <= service["metadata"]["labels"].items()
        for port in service["spec"]["ports"]
        if port["name"] in {e["port"] for e in monitor["spec"]["endpoints"]}
    ]
    assert [port["targetPort"] for port in scraped] == ["metrics"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_network_policy_opens_exactly_the_container_ports_and_no_egress(overlay):
    """The server calls nothing. A mutation review found Egress left out of
    ``policyTypes`` let through: egress is then unrestricted whatever the rules say."""
    objects = rendered(overlay)
    policy = one(objects, "NetworkPolicy")
    assert "Egress" in policy["spec"]["policyTypes"]
    assert policy["spec"].get("egress", []) == []
    labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    opened = sorted(p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"])
    assert opened == sorted(container_ports(objects).values())
    (metrics_rule,) = [
        rule
        for rule in policy["spec"]["ingress"]
        if [p["port"] for p in rule["ports"]] == [container_ports(objects)["metrics"]]
    ]
    assert all("namespaceSelector" in peer for peer in metrics_rule["from"])


def test_kubernetes_service_links_cannot_set_server_variables():
    """A Service named ``cardrules-grpc`` would inject ``CARDRULES_GRPC_PORT=tcp://...``."""
    for overlay in OVERLAYS:
        objects = rendered(overlay)
        pod = one(objects, "Deployment")["spec"]["template"]["spec"]
        assert pod["enableServiceLinks"] is False
        for service in all_of(objects, "Service"):
            prefix = service["metadata"]["name"].upper().replace("-", "_")
            injected = {f"{prefix}_SERVICE_HOST", f"{prefix}_SERVICE_PORT", f"{prefix}_PORT"}
            injected |= {
                f"{prefix}_SERVICE_PORT_{p['name'].upper()}" for p in service["spec"]["ports"]
            }
            assert not injected & accepted_env_names(), injected & accepted_env_names()


# -- probes and draining -----------------------------------------------------------------


def test_the_probes_ask_health_names_the_server_registers():
    for overlay in OVERLAYS:
        found = probes(overlay)
        startup, liveness, readiness = (found[kind]["grpc"]["service"] for kind in PROBES)
        assert {startup, liveness, readiness} <= set(HEALTH_SERVICES)
        # Readiness drops on SIGTERM so traffic moves away; liveness must not, or the
        # kubelet would kill a draining pod.
        assert readiness in DRAINED_ON_SHUTDOWN
        assert liveness not in DRAINED_ON_SHUTDOWN
        # The kubelet runs the readiness probe as soon as the startup probe passes: the
        # same name passes it too, rather than leaving the pod unready until the next tick.
        assert startup == readiness


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_startup_probe_makes_pods_ready_sooner_and_shields_a_slow_start(overlay):
    """docs/operations.md, "What the Deployment does": a new pod is Ready within a
    startup period of serving, not a readiness period; and the kubelet restarts a slow
    start no sooner than the liveness probe alone would have."""
    found = probes(overlay)
    startup, liveness, readiness = (found[kind] for kind in PROBES)
    assert startup["periodSeconds"] < readiness["periodSeconds"]
    assert startup.get("successThreshold", 1) == 1  # the API allows no other value
    # Liveness alone restarts a pod that fails it failureThreshold times in a row.
    liveness_budget = liveness["periodSeconds"] * liveness["failureThreshold"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= liveness_budget
    for probe in found.values():
        assert probe.get("initialDelaySeconds", 0) == 0  # the startup probe does the waiting


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_server_with_the_manifests_environment_answers_the_probes_and_the_scrape(overlay):
    """The scrape as the ServiceMonitor asks it: a mutation review found its scheme
    (https) and path let through."""
    objects = rendered(overlay)
    environ = manifest_env(objects, SECRETS)
    # Flags (loopback, free ports) win over the manifests' ports; all else is theirs.
    metrics = ["--metrics-port", str(free_port())]  # 0 would turn metrics off
    server = start_server(args=[*loopback_args(), *metrics], env=environ)
    try:
        assert server.log_events("listening"), server.logs
        with grpc.insecure_channel(server.target) as channel:
            stub = health(channel)
            for probe in probes(overlay).values():
                name = probe["grpc"]["service"]
                reply = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=10)
                assert reply.status == health_pb2.HealthCheckResponse.SERVING, name
            with pytest.raises(grpc.RpcError) as unknown:
                stub.Check(health_pb2.HealthCheckRequest(service="no-such-probe"), timeout=10)
            assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        (endpoint,) = one(objects, "ServiceMonitor")["spec"]["endpoints"]
        (logged,) = server.wait_for_logs("metrics")
        assert endpoint["path"] == logged["path"]  # served on any path: the log names its own
        scheme = endpoint.get("scheme", "http")
        scraped = metric_samples(f"{scheme}://127.0.0.1:{server.metrics_port}{endpoint['path']}")
        assert any(name == "grpc_server_handled_total" for name, _ in scraped)
        assert not [line for line in server.logs if line.get("level") in ("warning", "error")]
    finally:
        code = server.terminate()
    assert code == 0


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_pre_stop_pause_waits_out_endpoint_removal_within_the_grace_period(overlay):
    """A mutation review found a pause of 0 let through: SIGTERM would then come while
    kube-proxies and clients still send to the pod."""
    objects = rendered(overlay)
    assert pre_stop_seconds(objects) >= MIN_PRE_STOP_SECONDS
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    config = effective_config(manifest_env(objects, SECRETS))
    assert config.grace_seconds > 0
    # On SIGTERM the server serves on for the drain delay, then waits up to the grace.
    assert config.drain_delay_seconds > 0, "health-checking clients need time to move away"
    drain = config.drain_delay_seconds + config.grace_seconds
    assert pod["terminationGracePeriodSeconds"] > pre_stop_seconds(objects) + drain


# -- resources and security --------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_requests_within_limits(overlay):
    """The CPU limit and the memory per worker: tests/deploy/test_sizing.py."""
    resources = container(rendered(overlay))["resources"]
    for name in ("cpu", "memory"):
        assert quantity(resources["requests"][name]) <= quantity(resources["limits"][name])
    # Measured peak resident size: ~77 MiB at 16 calls in flight, ~96 MiB at 500 gRPC and
    # 500 HTTP calls at once (docs/operations.md, "Sizing").
    assert quantity(resources["requests"]["memory"]) >= 96 * 2**20


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_pod_runs_unprivileged(overlay):
    """The container's securityContext wins over the pod's: a mutation review found
    ``runAsUser: 0``, ``runAsNonRoot: false`` or ``privileged: true`` there let through,
    so it must hold exactly these settings."""
    pod = one(rendered(overlay), "Deployment")["spec"]["template"]["spec"]
    spec = container(rendered(overlay))
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    user = dict(final_stage())["USER"]
    assert user == f"{pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}"


def test_hpa_and_pdb_point_at_the_deployment():
    for overlay in OVERLAYS:
        objects = rendered(overlay)
        deployment = one(objects, "Deployment")
        hpa = one(objects, "HorizontalPodAutoscaler")
        assert hpa["spec"]["scaleTargetRef"] == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": deployment["metadata"]["name"],
        }
        # No replicas in the Deployment: every apply would reset what the HPA scaled to.
        assert "replicas" not in deployment["spec"]
        assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
        (metric,) = hpa["spec"]["metrics"]
        assert metric["resource"]["name"] == "cpu"
        pdb = one(objects, "PodDisruptionBudget")
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_node_drain_evicts_one_pod_at_a_time(overlay):
    """A mutation review found ``maxUnavailable: 100%`` let through: a drain could evict
    every pod at once. At every replica count the HPA may set, a drain evicts one pod
    at a time (``50%`` let two of prod's three go): never none, or it would wait for
    good."""
    objects = rendered(overlay)
    budget = one(objects, "PodDisruptionBudget")["spec"]["maxUnavailable"]
    hpa = one(objects, "HorizontalPodAutoscaler")["spec"]
    for replicas in range(hpa["minReplicas"], hpa["maxReplicas"] + 1):
        evicted = budget
        if isinstance(budget, str):  # a percentage, which Kubernetes rounds up
            assert budget.endswith("%"), budget
            evicted = math.ceil(replicas * int(budget[:-1]) / 100)
        assert evicted == 1, (replicas, budget)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pods_spread_over_zones_and_nodes_per_replica_set(overlay):
    """Each constraint selects the Deployment's pods and counts one ReplicaSet at a
    time (the label the Deployment controller adds), and none blocks scheduling."""
    template = one(rendered(overlay), "Deployment")["spec"]["template"]
    constraints = template["spec"]["topologySpreadConstraints"]
    labels = template["metadata"]["labels"]
    assert {c["topologyKey"] for c in constraints} == {
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
    }
    for constraint in constraints:
        assert constraint["labelSelector"]["matchLabels"].items() <= labels.items()
        assert constraint["matchLabelKeys"] == ["pod-template-hash"]
        assert constraint["whenUnsatisfiable"] == "ScheduleAnyway"


# -- the image ---------------------------------------------------------------------------


def test_the_image_exposes_the_container_ports_and_execs_the_server():
    stage = final_stage()
    exposed = {int(port) for name, args in stage if name == "EXPOSE" for port in args.split()}
    assert exposed == set(container_ports(rendered("base")).values())
    (entrypoint,) = [json.loads(args) for name, args in stage if name == "ENTRYPOINT"]
    assert entrypoint == ["cardrules", "serve"]  # exec form: SIGTERM reaches the server
    assert "args" not in container(rendered("base")) and "command" not in container(
        rendered("base")
    )


#: What a stop may take beyond the drain delay and the grace period: the HTTP server's
#: final close (service.http_gateway), or with workers the supervisor's wait for one
#: that does not stop.
STOP_MARGIN_SECONDS = max(1.0, SUPERVISOR_STOP_MARGIN_SECONDS)


@pytest.mark.parametrize("path", [DOCKERFILE, ROOT / "docs" / "operations.md"])
def test_the_docker_run_examples_let_a_stop_finish(path):
    """Docker's and Podman's default stop timeout, 10 s, would SIGKILL a server waiting
    out the drain delay and grace period; the Dockerfile's example lacked the flag, and
    15 s cut short the supervisor's wait for a worker that does not stop."""
    defaults = ServerConfig()
    needed = defaults.drain_delay_seconds + defaults.grace_seconds + STOP_MARGIN_SECONDS
    runs = [
        run
        for run in re.findall(r"^[#\s]*(?:docker|podman) run\b.*$", path.read_text(), re.MULTILINE)
        if "--entrypoint" not in run  # another command of the image, not the server
    ]
    assert runs
    for run in runs:
        timeout = re.search(r"--stop-timeout (\d+)", run)
        assert timeout is not None and int(timeout[1]) > needed, run


def healthcheck_command() -> list[str]:
    (arguments,) = [args for name, args in final_stage() if name == "HEALTHCHECK"]
    command: list[str] = json.loads(arguments[arguments.index("CMD") + 3 :])
    assert command[0] == "python"
    return [sys.executable, *command[1:]]


def final_stage_items(kind: str) -> dict[str, str]:
    """The ``key=value`` items of the final stage's ``LABEL`` or ``ENV`` instructions."""
    return dict(
        item.split("=", 1)
        for instruction, arguments in final_stage()
        if instruction == kind
        for item in shlex.split(arguments)
    )


def test_the_image_is_labelled_with_the_projects_name_and_version():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    labels = final_stage_items("LABEL")
    assert labels["org.opencontainers.image.title"] == project["name"]
    assert labels["org.opencontainers.image.version"] == project["version"]
    assert labels["org.opencontainers.image.description"]


def test_the_image_logs_json_without_the_config_map():
    """Under ``docker run`` only the image's ENV tells the server to write the JSON lines
    log collectors read: a mutation review found ``CARDRULES_LOG_FORMAT=text`` there
    let through."""
    image = {k: v for k, v in final_stage_items("ENV").items() if k.startswith(CONFIG_PREFIX)}
    assert image.keys() <= accepted_env_names(), image.keys() - accepted_env_names()
    assert effective_config(image).log_format == "json"


def test_every_place_that_names_the_release_names_the_projects_version():
    """A version bump in pyproject.toml left the manifests deploying the old image, with
    every test green (a release review)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    version = project["version"]
    client = tomllib.loads((ROOT / "clients/python/pyproject.toml").read_text())["project"]
    assert client["version"] == version
    # Installed alone the server broke at import, and pip check found nothing missing.
    assert f"{client['name']}=={version}" in project["dependencies"]
    named = {
        path: re.findall(pattern, (ROOT / path).read_text())
        for path, pattern in [
            ("k8s/base/deployment.yaml", r"image: cardrules:(\S+)"),
            ("k8s/overlays/prod/kustomization.yaml", r"newTag: (\S+)"),
            ("docs/operations.md", r"\bcardrules:([0-9][^\s`]*)"),
        ]
    }
    assert all(named.values()), named  # each pattern still finds its tags
    assert {path: set(tags) for path, tags in named.items()} == {path: {version} for path in named}


def test_the_image_healthcheck_asks_the_grpc_health_service():
    command = healthcheck_command()
    server = start_server(args=loopback_args())
    try:
        environ = {"CARDRULES_GRPC_PORT": str(server.grpc_port)}
        healthy = subprocess.run(command, env=environ, capture_output=True, timeout=30)
        assert healthy.returncode == 0, healthy.stderr
    finally:
        assert server.terminate() == 0
    # The reason goes to stderr, which Docker keeps in the health log (service/healthcheck.py):
    # an exit 1 alone never says which address the check asked or what grpc answered.
    port = free_port()
    nobody = subprocess.run(
        command, env={"CARDRULES_GRPC_PORT": str(port)}, capture_output=True, timeout=30
    )
    assert nobody.returncode != 0
    assert f"unhealthy: 127.0.0.1:{port}: UNAVAILABLE: " in nobody.stderr.decode()


def run_healthcheck(environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        healthcheck_command(), env=environ, cwd=ROOT, capture_output=True, text=True, timeout=30
    )


#: Spellings of a port that ``cardrules serve`` reads as the port, with the host it
#: listens on. Loopback missed a server on another address: the container turned
#: unhealthy while serving.
SPELLINGS = {
    "trailing space": ("127.0.0.1", "{} "),
    "another loopback address": ("127.0.0.2", "{}"),
}


@pytest.mark.parametrize("name", SPELLINGS)
def test_the_image_healthcheck_finds_the_server_where_its_variables_put_it(name):
    """The check reads CARDRULES_HOST and CARDRULES_GRPC_PORT as the server does."""
    host, spelling = SPELLINGS[name]
    port = free_port()
    env = {
        "CARDRULES_HOST": host,
        "CARDRULES_GRPC_PORT": spelling.format(port),
        "CARDRULES_METRICS_PORT": "0",
    }
    server = start_server(env=env, loopback_flags=False)
    try:
        assert server.grpc_port == port
        checked = run_healthcheck(server_environment(env))
        assert checked.returncode == 0, checked.stderr
    finally:
        assert server.terminate() == 0


# The server took "5_0051", "+50051" and full-width digits (int()'s spellings), which
# gRPC's target parser refuses: the image's health check failed a serving container.
@pytest.mark.parametrize(
    "value", ["0x10", "-1", "65536", "5_0051", "+50051", "\uff15\uff10\uff10\uff15\uff11"]
)
def test_the_image_healthcheck_reports_a_port_the_server_refuses_as_the_server_does(value):
    environ = server_environment({"CARDRULES_GRPC_PORT": value})
    refused = subprocess.run(
        [CARDRULES, "serve"], env=environ, capture_output=True, text=True, timeout=30
    )
    assert refused.returncode == 2
    message = refused.stderr.strip().removeprefix("cardrules: error: ")
    checked = run_healthcheck(environ)
    assert checked.returncode == 1  # never 2, which Docker reserves
    assert message in checked.stderr


def test_the_image_healthcheck_fails_a_draining_server():
    """On SIGTERM readiness turns NOT_SERVING for the drain delay, and so does the check."""
    port = free_port()
    env = {
        "CARDRULES_HOST": "127.0.0.1",
        "CARDRULES_GRPC_PORT": str(port),
        "CARDRULES_METRICS_PORT": "0",
        "CARDRULES_DRAIN_DELAY_SECONDS": "20",
    }
    server = start_server(env=env, loopback_flags=False)
    try:
        server.process.send_signal(signal.SIGTERM)
        server.wait_for_logs("draining")
        checked = run_healthcheck(server_environment(env))
        assert checked.returncode == 1
        assert f"127.0.0.1:{port}: readiness is NOT_SERVING" in checked.stderr
    finally:
        server.kill()


def test_the_image_healthcheck_does_not_read_the_state_keys(tmp_path):
    """A keys file gone since the server read it at start (a Secret volume remounted)
    must not turn a serving container unhealthy: the check needs only the address."""
    keys = tmp_path / "keys"
    keys.write_text(TEST_KEY + "\n")
    port = free_port()
    env = {
        "CARDRULES_HOST": "127.0.0.1",
        "CARDRULES_GRPC_PORT": str(port),
        "CARDRULES_METRICS_PORT": "0",
        "CARDRULES_STATE_KEYS_FILE": str(keys),
    }
    server = start_server(env=env, keys=None, loopback_flags=False)
    try:
        keys.unlink()
        checked = run_healthcheck(server_environment(env, keys=None))
        assert checked.returncode == 0, checked.stderr
    finally:
        assert server.terminate() == 0


def test_the_image_healthcheck_says_it_cannot_check_an_ephemeral_port():
    checked = run_healthcheck(server_environment({"CARDRULES_GRPC_PORT": "0"}))
    assert checked.returncode == 1
    assert "CARDRULES_GRPC_PORT is 0" in checked.stderr
