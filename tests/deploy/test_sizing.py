"""The manifests' sizing and connection age hold what docs/operations.md says.

"Scaling and load balancing": the ConfigMap's max connection age bounds how long a
pod the HPA adds waits for calls from existing gRPC clients. "Sizing" and
"Workers": the CPU limit leaves a worker the grpc threads beside its main thread,
the memory rule per worker is derived from docs/benchmarks.md's soak figures, and
the worked example of the pod count is the formula's answer. Every check reads the
rendered manifests (the real kustomize), so a changed value must keep to the rules.
"""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import pytest

from service.config import ServerConfig
from tests.deploy.manifests import (
    K8S,
    OVERLAYS,
    ROOT,
    container,
    effective_config,
    manifest_env,
    one,
    quantity,
    rendered,
)
from tests.deploy.rendering import Manifest, kustomize
from tests.service.server_process import TEST_KEY

OPERATIONS = ROOT / "docs" / "operations.md"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
README = ROOT / "README.md"
CONFIG_ENV = K8S / "base" / "config.env"
SECRETS = {"CARDRULES_STATE_KEYS": TEST_KEY}
MIB = 2**20

#: A pod the HPA adds gets calls from an existing client once one of that client's
#: connections ages out: at most this long (plus gRPC's 10% jitter) after it scaled.
LONGEST_AGE_SECONDS = 60
#: gRPC's DNS resolvers re-resolve at most this often by default: a shorter age only
#: adds reconnects.
DNS_MIN_RESOLUTION_SECONDS = 30
#: What one saturated worker process used: its main thread's core and grpc's threads.
WORKER_CORES = 1.15
#: The memory rule for N workers (docs/operations.md, "Sizing"): a supervisor, and per
#: worker the long-run footprint one process levels off at, plus a little for the limit.
SUPERVISOR_MIB = 70
WORKER_REQUEST_MIB = 140
WORKER_LIMIT_MIB = 150


def flat(text: str) -> str:
    """Text with every run of white space one space: a rule may wrap in the guide."""
    return " ".join(text.split())


def section(title: str) -> str:
    """A ``## `` or ``### `` section of docs/operations.md, up to the next heading."""
    text = OPERATIONS.read_text()
    start = re.search(rf"^#{{2,3}} {re.escape(title)}\n", text, re.MULTILINE)
    assert start, title
    end = re.compile(r"^#{2,3} ", re.MULTILINE).search(text, start.end())
    return flat(text[start.end() : end.start() if end else len(text)])


def config_of(objects: list[Manifest]) -> ServerConfig:
    return effective_config(manifest_env(objects, SECRETS))


def sizing_problems(objects: list[Manifest]) -> list[str]:
    """Where a render's resources fall short of its worker count (empty: none)."""
    workers = config_of(objects).workers
    resources = container(objects)["resources"]
    problems = []
    if quantity(resources["limits"]["cpu"]) < WORKER_CORES * workers:
        problems.append(f"cpu limit {resources['limits']['cpu']} for {workers} worker(s)")
    limit_floor = (SUPERVISOR_MIB + WORKER_LIMIT_MIB * workers) * MIB
    if quantity(resources["limits"]["memory"]) < limit_floor:
        problems.append(f"memory limit {resources['limits']['memory']} for {workers} workers")
    request_floor = (SUPERVISOR_MIB + WORKER_REQUEST_MIB * workers) * MIB
    if workers > 1 and quantity(resources["requests"]["memory"]) < request_floor:
        problems.append(f"memory request {resources['requests']['memory']} for {workers} workers")
    return problems


# -- connection age ----------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_new_pods_get_calls_from_existing_clients_within_a_minute(overlay):
    """At 300 s a pod added by the HPA waited up to about 330 s for its first call."""
    age = config_of(rendered(overlay)).max_connection_age_seconds
    assert DNS_MIN_RESOLUTION_SECONDS <= age <= LONGEST_AGE_SECONDS


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_hpa_keeps_a_pod_it_added_until_existing_clients_reach_it(overlay):
    """A pod the HPA adds idles until existing clients' connections age out (+10%
    jitter) and pulls the CPU average down meanwhile: a mutation review found a
    scale-down window of 0, which removes it again, let through. Twice that wait
    leaves room for the CPU metric's lag."""
    objects = rendered(overlay)
    age = config_of(objects).max_connection_age_seconds
    scale_down = one(objects, "HorizontalPodAutoscaler")["spec"]["behavior"]["scaleDown"]
    assert scale_down["stabilizationWindowSeconds"] >= 2 * age * 1.1


def test_the_server_default_still_never_ages_connections():
    """Outside a cluster of replicas there is no new pod to find (the guide says why)."""
    assert ServerConfig().max_connection_age_seconds == 0
    assert "The embedded default stays 0 (never)" in section("Scaling and load balancing")


def test_the_guides_name_the_config_maps_connection_age():
    value = one(rendered("base"), "ConfigMap")["data"]["CARDRULES_MAX_CONNECTION_AGE_SECONDS"]
    scaling = section("Scaling and load balancing")
    assert f"the ConfigMap sets {value}," in scaling
    assert f"at {value}), not within the HPA's 30 s" in scaling
    assert f"by default; {value} in the Kubernetes ConfigMap)" in flat(README.read_text())


# -- CPU ---------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_cpu_limit_leaves_each_worker_its_grpc_threads(overlay):
    """Under a limit of 1 core the kernel throttled one worker (docs/operations.md)."""
    limit = quantity(container(rendered(overlay))["resources"]["limits"]["cpu"])
    assert limit >= WORKER_CORES * config_of(rendered(overlay)).workers


def test_prod_keeps_requests_equal_to_limits():
    """Guaranteed QoS, the reason the guide gives for keeping a CPU limit at all."""
    resources = container(rendered("overlays/prod"))["resources"]
    assert resources["requests"] == resources["limits"]


def test_the_guide_states_the_cpu_per_call_and_the_limit():
    sizing = section("Sizing")
    assert "0.7 to 1.0 ms of server CPU per call" in sizing
    assert "1,000 to 1,400 calls/s per busy core" in sizing
    assert "the limit is 1200m in every overlay" in sizing
    for overlay in OVERLAYS:
        assert container(rendered(overlay))["resources"]["limits"]["cpu"] == "1200m", overlay
    assert "one process uses at most one" not in (K8S / "base" / "deployment.yaml").read_text()


def pods_needed(calls_per_second: float, ms_per_call: float, request: float, target: int) -> int:
    """The guide's formula: busy cores over each pod's share at the HPA target, plus one."""
    cores = calls_per_second * ms_per_call / 1000
    return math.ceil(round(cores / (request * target / 100), 6)) + 1


def test_the_worked_example_is_the_formulas_answer():
    prod = rendered("overlays/prod")
    request = quantity(container(prod)["resources"]["requests"]["cpu"])
    (metric,) = one(prod, "HorizontalPodAutoscaler")["spec"]["metrics"]
    target = metric["resource"]["target"]["averageUtilization"]
    example = re.search(
        r"For ([\d,]+) calls/s at peak in prod: [\d,]+ \N{MULTIPLICATION SIGN} ([\d.]+) ms "
        r"= [\d.]+ cores \N{DIVISION SIGN} ([\d.]+) = [\d.]+, so \d+ pods, plus one: "
        r"\*\*(\d+)\*\*",
        section("Sizing"),
    )
    assert example, "the worked example is missing or reworded"
    calls, ms, share, pods = example.groups()
    assert float(share) == pytest.approx(request * target / 100)
    assert int(pods) == pods_needed(float(calls.replace(",", "")), float(ms), request, target)
    assert int(pods) <= one(prod, "HorizontalPodAutoscaler")["spec"]["maxReplicas"]


# -- memory per worker -------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_is_sized_for_its_workers(overlay):
    assert sizing_problems(rendered(overlay)) == []


def test_more_workers_without_more_resources_is_caught(tmp_path: Path):
    """The check above is not vacuous: 2 workers under one worker's resources fail it,
    and pass once the resources follow the rule."""
    copy = Path(shutil.copytree(K8S, tmp_path / "k8s"))
    config = copy / "base" / "config.env"
    config.write_text(config.read_text().replace("CARDRULES_WORKERS=1\n", "CARDRULES_WORKERS=2\n"))
    problems = sizing_problems(kustomize(copy / "base"))
    assert [problem.split(" ")[:2] for problem in problems] == [
        ["cpu", "limit"],
        ["memory", "limit"],
        ["memory", "request"],
    ]
    deployment = copy / "base" / "deployment.yaml"
    text = deployment.read_text()
    for old, new in (
        ("cpu: 1200m", "cpu: 2400m"),
        ("memory: 160Mi", "memory: 350Mi"),
        ("memory: 256Mi", "memory: 370Mi"),
    ):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    deployment.write_text(text)
    assert sizing_problems(kustomize(copy / "base")) == []


def soak_figure(pattern: str) -> float:
    found = re.search(pattern, flat(BENCHMARKS.read_text()))
    assert found, pattern
    return float(found.group(1).replace(",", ""))


def test_the_memory_rule_covers_the_soak_figures_it_is_derived_from():
    """docs/benchmarks.md, "Soak": the supervisor's size, the level one worker reaches,
    and the 2-worker run's sum, which passed the one-worker limit of 256 Mi."""
    supervisor = soak_figure(r"The supervisor stayed at ([\d.]+) MiB")
    one_worker_level = soak_figure(r"The footprint levels off at about ([\d.]+) MiB")
    two_workers_at_ten_minutes = soak_figure(
        r"[\d.]+ at the end of the warm-up, ([\d.]+) at the end"
    )
    assert supervisor <= SUPERVISOR_MIB
    assert one_worker_level <= WORKER_REQUEST_MIB <= WORKER_LIMIT_MIB
    assert two_workers_at_ten_minutes > 256  # the reason for the rule
    assert two_workers_at_ten_minutes <= SUPERVISOR_MIB + 2 * WORKER_REQUEST_MIB


def test_the_guide_and_the_config_state_the_memory_rule():
    limit = f"{SUPERVISOR_MIB} MiB + {WORKER_LIMIT_MIB} MiB per worker"
    request = f"{SUPERVISOR_MIB} MiB + {WORKER_REQUEST_MIB} MiB per worker"
    sizing = section("Sizing")
    assert f"**{limit}**" in sizing
    assert request in sizing
    assert f"{SUPERVISOR_MIB} MiB + {WORKER_LIMIT_MIB} MiB per worker" in section("Workers")
    config = flat(" ".join(line.lstrip("# ") for line in CONFIG_ENV.read_text().splitlines()))
    assert limit in config and request in config
