"""Prometheus metrics (design section 6): go-grpc-prometheus names, pre-created series,
domain counters, the /metrics endpoint and multiprocess aggregation across forked workers."""

from __future__ import annotations

import collections
import errno
import functools
import json
import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from cardrules.cards.v1 import cards_pb2
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf.message import Message
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from engine.krypkasino import Reason, Removal, Rules
from service.calls import CallInfo, CallRunner, Handler, within_deadline
from service.codec import move_kind_label
from service.config import ServerConfig
from service.errors import ServiceError, invalid_argument
from service.metrics import (
    GRPC_CODES,
    HANDLING_BUCKETS,
    MAX_NAMED_VARIANTS,
    OTHER_VARIANT,
    STATE_TOKEN_REFUSALS,
    SUPERVISOR,
    ServiceMetrics,
    _ReservedMmapedDict,
    add_workers_process_metrics,
    code_label,
    variant_label,
)
from service.server import build_api, new_metrics
from service.tokens import KeyRing
from service.value_space import VALUE_FILE_BYTES, ValueFileFullError
from tests.service.metrics_helpers import Samples, samples
from tests.service.server_process import TEST_KEY, in_mount_namespace

ROOT = Path(__file__).resolve().parents[2]
SERVICE = "cardrules.krypkasino.v1.KrypkasinoService"
METHODS = {SERVICE: ["NewGame", "LegalMoves", "Play", "Score", "GetView"], "test.Echo": ["Echo"]}
GRPC_LABELS = {"grpc_type", "grpc_service", "grpc_method"}

# Family name (as the text format has it), type, label names; from go-grpc-prometheus.
EXPECTED_FAMILIES = {
    "grpc_server_started_total": ("counter", GRPC_LABELS),
    "grpc_server_handled_total": ("counter", GRPC_LABELS | {"grpc_code"}),
    "grpc_server_msg_received_total": ("counter", GRPC_LABELS),
    "grpc_server_msg_sent_total": ("counter", GRPC_LABELS),
    "grpc_server_handling_seconds": ("histogram", GRPC_LABELS),
    "cardrules_retry_attempts_total": ("counter", GRPC_LABELS),
    "cardrules_games_started_total": ("counter", {"game", "players", "teams", "variant"}),
    "cardrules_moves_total": ("counter", {"game", "kind"}),
    "cardrules_illegal_moves_total": ("counter", {"game", "reason"}),
    "cardrules_sweeps_total": ("counter", {"game", "kind"}),
    "cardrules_seat_tokens_renewed_total": ("counter", {"game"}),
    "cardrules_state_tokens_renewed_total": ("counter", {"game"}),
    "cardrules_state_tokens_refused_total": ("counter", {"game", "reason"}),
    "cardrules_seat_tokens_refused_total": ("counter", {"game", "reason"}),
    "cardrules_log_lines_dropped_total": ("counter", set()),
    "cardrules_http_cors_preflights_refused_total": ("counter", set()),
}

# Go's codes.Code.String() of every status code: go-grpc-prometheus's grpc_code values.
GO_CODE_STRINGS = {
    grpc.StatusCode.OK: "OK",
    grpc.StatusCode.CANCELLED: "Canceled",
    grpc.StatusCode.UNKNOWN: "Unknown",
    grpc.StatusCode.INVALID_ARGUMENT: "InvalidArgument",
    grpc.StatusCode.DEADLINE_EXCEEDED: "DeadlineExceeded",
    grpc.StatusCode.NOT_FOUND: "NotFound",
    grpc.StatusCode.ALREADY_EXISTS: "AlreadyExists",
    grpc.StatusCode.PERMISSION_DENIED: "PermissionDenied",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "ResourceExhausted",
    grpc.StatusCode.FAILED_PRECONDITION: "FailedPrecondition",
    grpc.StatusCode.ABORTED: "Aborted",
    grpc.StatusCode.OUT_OF_RANGE: "OutOfRange",
    grpc.StatusCode.UNIMPLEMENTED: "Unimplemented",
    grpc.StatusCode.INTERNAL: "Internal",
    grpc.StatusCode.UNAVAILABLE: "Unavailable",
    grpc.StatusCode.DATA_LOSS: "DataLoss",
    grpc.StatusCode.UNAUTHENTICATED: "Unauthenticated",
}

# go-grpc-prometheus's help texts (server_metrics.go), word for word.
GO_GRPC_PROMETHEUS_HELP = {
    "grpc_server_started_total": "Total number of RPCs started on the server.",
    "grpc_server_handled_total": (
        "Total number of RPCs completed on the server, regardless of success or failure."
    ),
    "grpc_server_msg_received_total": "Total number of RPC stream messages received on the server.",
    "grpc_server_msg_sent_total": "Total number of gRPC stream messages sent by the server.",
    "grpc_server_handling_seconds": (
        "Histogram of response latency (seconds) of gRPC that had been "
        "application-level handled by the server."
    ),
}


def value(found: Samples, name: str, **labels: str) -> float:
    return found[(name, frozenset(labels.items()))]


def rpc(method: str, service: str = SERVICE, **more: str) -> dict[str, str]:
    return {"grpc_type": "unary", "grpc_service": service, "grpc_method": method, **more}


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def metrics(registry: CollectorRegistry) -> ServiceMetrics:
    return ServiceMetrics(registry, METHODS)


def exposition(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()


def test_code_labels_are_go_spellings():
    assert len(GRPC_CODES) == len(grpc.StatusCode) == 17
    for code in grpc.StatusCode:
        assert code_label(code) == GRPC_CODES[code.value[0]]
    assert code_label(grpc.StatusCode.OK) == "OK"
    assert code_label(grpc.StatusCode.CANCELLED) == "Canceled"
    assert code_label(grpc.StatusCode.INVALID_ARGUMENT) == "InvalidArgument"
    assert code_label(grpc.StatusCode.FAILED_PRECONDITION) == "FailedPrecondition"
    assert code_label(grpc.StatusCode.PERMISSION_DENIED) == "PermissionDenied"
    assert code_label(grpc.StatusCode.UNAUTHENTICATED) == "Unauthenticated"


def test_every_status_code_is_labelled_and_pre_created_with_gos_spelling(registry, metrics):
    """Every code, not only the common ones, is spelled as Go's ``codes.Code.String()``
    in ``grpc_code`` and pre-created under that spelling: dashboards and the alerts
    (``Internal|Unknown|DataLoss`` for server faults, ``Unavailable`` for tokens of a newer
    release) match these exact strings."""
    assert {code: code_label(code) for code in grpc.StatusCode} == GO_CODE_STRINGS
    pre_created = {
        dict(labels)["grpc_code"]
        for name, labels in samples(exposition(registry))
        if name == "grpc_server_handled_total" and ("grpc_method", "Play") in labels
    }
    assert pre_created == set(GO_CODE_STRINGS.values())


def test_names_types_and_labels_match_go_grpc_prometheus(registry, metrics):
    families = {f.name: f for f in text_string_to_metric_families(exposition(registry))}
    # The parser strips a counter's _total from the family name; put it back.
    found = {
        (f.name + "_total" if f.type == "counter" else f.name): (
            f.type,
            {label for s in f.samples for label in s.labels} - {"le"},
        )
        for f in families.values()
    }
    assert found == EXPECTED_FAMILIES
    text = exposition(registry)
    assert "# TYPE grpc_server_handled_total counter" in text
    assert "# TYPE grpc_server_handling_seconds histogram" in text
    assert "_created" not in text  # go-grpc-prometheus exports none


def test_grpc_help_texts_are_go_grpc_prometheus_ones(registry, metrics):
    """The gRPC families carry go-grpc-prometheus's help texts word for word, as its
    names: the exposition of the same series does not differ from a Go server's."""
    helps = {}
    for line in exposition(registry).splitlines():
        if line.startswith("# HELP grpc_server_"):
            _, _, name, text = line.split(" ", 3)
            helps[name] = text
    assert helps == GO_GRPC_PROMETHEUS_HELP


def test_every_series_exists_at_zero_before_any_rpc(registry, metrics):
    found = samples(exposition(registry))
    for service, methods in METHODS.items():
        for method in methods:
            labels = rpc(method, service)
            for name in (
                "grpc_server_started_total",
                "grpc_server_msg_received_total",
                "grpc_server_msg_sent_total",
                "grpc_server_handling_seconds_count",
                "grpc_server_handling_seconds_sum",
                "cardrules_retry_attempts_total",
            ):
                assert value(found, name, **labels) == 0
            for code in GRPC_CODES:
                assert value(found, "grpc_server_handled_total", **labels, grpc_code=code) == 0
            buckets = [*(repr(b) for b in HANDLING_BUCKETS[:-1]), "1.0", "+Inf"]
            for le in buckets:
                assert value(found, "grpc_server_handling_seconds_bucket", **labels, le=le) == 0
    for kind in ("crawl", "capture", "sweep", "double_sweep"):
        assert value(found, "cardrules_moves_total", game="krypkasino", kind=kind) == 0
    for kind in ("sweep", "double_sweep"):
        assert value(found, "cardrules_sweeps_total", game="krypkasino", kind=kind) == 0
    assert value(found, "cardrules_seat_tokens_renewed_total", game="krypkasino") == 0
    assert value(found, "cardrules_state_tokens_renewed_total", game="krypkasino") == 0
    for refusal in STATE_TOKEN_REFUSALS:
        refused = value(
            found, "cardrules_state_tokens_refused_total", game="krypkasino", reason=refusal
        )
        assert refused == 0
    assert value(found, "cardrules_log_lines_dropped_total") == 0
    assert value(found, "cardrules_http_cors_preflights_refused_total") == 0
    for reason in Reason:
        assert (
            value(found, "cardrules_illegal_moves_total", game="krypkasino", reason=reason.value)
            == 0
        )
    # The default variant of every seating K3 allows, and no other variant, yet.
    games = {
        (labels["players"], labels["teams"], labels["variant"]): count
        for (name, pairs), count in found.items()
        if name == "cardrules_games_started_total"
        and (labels := dict(pairs))["game"] == "krypkasino"
    }
    seatings = [("2", "individual"), ("3", "individual"), ("4", "individual"), ("4", "pairs")]
    seatings += [("5", "individual"), ("6", "individual"), ("6", "pairs"), ("6", "trios")]
    assert games == {(*seating, "default"): 0 for seating in seatings}
    # 6 methods x (3 plain counters + 17 codes + 13 buckets and +Inf + sum + count).
    grpc_series = [key for key in found if key[0].startswith("grpc_server_")]
    assert len(grpc_series) == 6 * (3 + 17 + len(HANDLING_BUCKETS) + 1 + 2)


def test_buckets_span_a_hundred_microseconds_to_a_second():
    assert HANDLING_BUCKETS[0] == 0.0001 and HANDLING_BUCKETS[-1] == 1.0
    assert list(HANDLING_BUCKETS) == sorted(HANDLING_BUCKETS)


def test_latency_buckets_are_exported_with_their_exact_bounds(registry, metrics):
    """The ``le`` values are part of each bucket series' identity: queries and the
    slow-Play alert (p99 over 100 ms) read them, so no bound may move. From 100 µs
    (docs/operations.md) to a second, then ``+Inf``."""
    bounds = [
        s.labels["le"]
        for family in text_string_to_metric_families(exposition(registry))
        if family.name == "grpc_server_handling_seconds"
        for s in family.samples
        if s.name == "grpc_server_handling_seconds_bucket" and s.labels["grpc_method"] == "Play"
    ]
    assert bounds == [
        "0.0001",
        "0.00025",
        "0.0005",
        "0.001",
        "0.0025",
        "0.005",
        "0.01",
        "0.025",
        "0.05",
        "0.1",
        "0.25",
        "0.5",
        "1.0",
        "+Inf",
    ]


def test_rpcs_are_counted_and_timed(registry, metrics):
    for _ in range(3):
        metrics.rpc_started(SERVICE, "Play")
    metrics.rpc_handled(SERVICE, "Play", "OK", 0.0003)
    metrics.rpc_handled(SERVICE, "Play", "OK", 0.002)
    metrics.rpc_handled(SERVICE, "Play", "FailedPrecondition", 0.3)
    found = samples(exposition(registry))
    play = rpc("Play")
    assert value(found, "grpc_server_started_total", **play) == 3
    assert value(found, "grpc_server_msg_received_total", **play) == 3
    assert value(found, "grpc_server_msg_sent_total", **play) == 2  # no response on an error
    assert value(found, "grpc_server_handled_total", **play, grpc_code="OK") == 2
    assert value(found, "grpc_server_handled_total", **play, grpc_code="FailedPrecondition") == 1
    assert value(found, "grpc_server_handled_total", **play, grpc_code="Internal") == 0
    assert value(found, "grpc_server_handling_seconds_count", **play) == 3
    assert value(found, "grpc_server_handling_seconds_sum", **play) == pytest.approx(0.3023)
    bucket = "grpc_server_handling_seconds_bucket"
    assert value(found, bucket, **play, le="0.00025") == 0
    assert value(found, bucket, **play, le="0.0005") == 1
    assert value(found, bucket, **play, le="0.0025") == 2
    assert value(found, bucket, **play, le="0.25") == 2
    assert value(found, bucket, **play, le="0.5") == 3
    assert value(found, bucket, **play, le="+Inf") == 3
    # Other methods untouched.
    assert value(found, "grpc_server_started_total", **rpc("Score")) == 0


def test_the_call_runner_counts_and_times_every_outcome(registry, metrics):
    """Every call through ``CallRunner`` is started, handled with its code and timed once,
    under its own service and method: an answer, a refusal and a handler's bug."""
    runner = CallRunner(metrics)

    def slow(request: int, info: CallInfo) -> int:
        time.sleep(0.02)
        return request

    def refuse(request: int, info: CallInfo) -> int:
        raise invalid_argument("BAD_THING", "no")

    def broken(request: int, info: CallInfo) -> int:
        raise RuntimeError("a bug")

    for handler in (slow, refuse, broken):
        runner.run(SERVICE, "Play", "grpc", "rid", handler, 1)
    found = samples(exposition(registry))
    play = rpc("Play")
    assert value(found, "grpc_server_started_total", **play) == 3
    assert value(found, "grpc_server_msg_sent_total", **play) == 1
    for code in ("OK", "InvalidArgument", "Internal"):
        assert value(found, "grpc_server_handled_total", **play, grpc_code=code) == 1
    assert value(found, "grpc_server_handling_seconds_count", **play) == 3
    # The slow answer took at least 20 ms: past the 10 ms bucket, where the others may be
    # (no upper bound: the bug's traceback took over a second on a loaded machine).
    assert value(found, "grpc_server_handling_seconds_sum", **play) >= 0.02
    assert value(found, "grpc_server_handling_seconds_bucket", **play, le="0.01") <= 2
    assert value(found, "grpc_server_handling_seconds_bucket", **play, le="+Inf") == 3
    assert value(found, "grpc_server_started_total", **rpc("Score")) == 0


def test_unknown_code_label_is_refused(metrics):
    with pytest.raises(ValueError):
        metrics.rpc_handled(SERVICE, "Play", "INVALID_ARGUMENT", 0.001)


def test_variants_past_the_bound_count_as_other_and_named_ones_keep_counting(registry, metrics):
    """Anyone may call NewGame: the variant label must not let a client make a series
    for every combination of flags. ``default``, pre-created, is one of the named."""
    # docs/operations.md names both for dashboards and alerts: "other", 32 variants.
    assert (OTHER_VARIANT, MAX_NAMED_VARIANTS) == ("other", 32)
    flags = [f"flag{index}" for index in range(MAX_NAMED_VARIANTS + 5)]
    for name in flags:
        metrics.game_started("krypkasino", 2, "individual", variant_label((name,)))
    metrics.game_started("krypkasino", 2, "individual", variant_label((flags[0],)))
    found = samples(exposition(registry))
    games = {
        dict(labels)["variant"]: count
        for (name, labels), count in found.items()
        if name == "cardrules_games_started_total"
    }
    assert games == {
        "default": 0.0,
        **{name: 1.0 for name in flags[: MAX_NAMED_VARIANTS - 1]},
        flags[0]: 2.0,
        OTHER_VARIANT: 6.0,
    }


def test_domain_counters(registry, metrics):
    metrics.game_started("krypkasino", 4, "pairs", variant_label(()))
    metrics.game_started("krypkasino", 4, "pairs", "default")
    metrics.game_started("krypkasino", 2, "individual", variant_label(("bordstabbe", "four_four")))
    for kind in ("crawl", "crawl", "capture", "sweep", "double_sweep", "sweep"):
        metrics.move_played("krypkasino", kind)
    metrics.illegal_move("krypkasino", "NOT_YOUR_TURN")
    metrics.illegal_move("krypkasino", "NOT_YOUR_TURN")
    found = samples(exposition(registry))
    games = "cardrules_games_started_total"
    assert (
        value(found, games, game="krypkasino", players="4", teams="pairs", variant="default") == 2
    )
    assert (
        value(
            found,
            games,
            game="krypkasino",
            players="2",
            teams="individual",
            variant="bordstabbe+four_four",
        )
        == 1
    )
    moves = {
        kind: value(found, "cardrules_moves_total", game="krypkasino", kind=kind)
        for kind in ("crawl", "capture", "sweep", "double_sweep")
    }
    assert moves == {"crawl": 2, "capture": 1, "sweep": 2, "double_sweep": 1}
    assert value(found, "cardrules_sweeps_total", game="krypkasino", kind="sweep") == 2
    assert value(found, "cardrules_sweeps_total", game="krypkasino", kind="double_sweep") == 1
    illegal = "cardrules_illegal_moves_total"
    assert value(found, illegal, game="krypkasino", reason="NOT_YOUR_TURN") == 2
    assert value(found, illegal, game="krypkasino", reason="MUST_SWEEP") == 0
    with pytest.raises(ValueError):
        metrics.move_played("krypkasino", "build")


def test_only_sweeps_and_double_sweeps_count_as_sweeps(registry, metrics):
    """``cardrules_sweeps_total`` has the kinds ``sweep`` and ``double_sweep`` and no other:
    a crawl or a capture counts in ``cardrules_moves_total`` alone."""
    for kind in ("crawl", "capture", "capture", "sweep", "double_sweep", "double_sweep"):
        metrics.move_played("krypkasino", kind)
    found = samples(exposition(registry))

    def by_kind(name: str) -> dict[str, float]:
        return {dict(labels)["kind"]: count for (n, labels), count in found.items() if n == name}

    assert by_kind("cardrules_sweeps_total") == {"sweep": 1, "double_sweep": 2}
    assert by_kind("cardrules_moves_total") == {
        "crawl": 1,
        "capture": 2,
        "sweep": 1,
        "double_sweep": 2,
    }


def test_label_helpers():
    from engine.krypkasino import Config, Rules, SweepKind
    from engine.krypkasino.config import Removal

    assert variant_label(Rules().enabled()) == "default"
    rules = Rules(nordic_scoring=True, removal=Removal.NONE)
    assert variant_label(Config(players=2, rules=rules).rules.enabled()) == (
        "nordic_scoring+removal=none"
    )
    assert move_kind_label(True, SweepKind.NONE) == "crawl"
    assert move_kind_label(False, SweepKind.NONE) == "capture"
    assert move_kind_label(False, SweepKind.SWEEP) == "sweep"
    assert move_kind_label(False, SweepKind.DOUBLE) == "double_sweep"


def test_the_variant_label_keeps_the_order_of_the_enabled_flags():
    """``variant`` is ``Rules.enabled()`` joined as given (the spec's flag order,
    ``removal=`` last), never re-sorted: a variant's series and the queries that name
    it keep their label value."""
    rules = Rules(four_four=True, bordstabbe=True, removal=Removal.NONE)
    assert variant_label(rules.enabled()) == "four_four+bordstabbe+removal=none"


def test_registries_are_independent_and_nothing_lands_in_the_default_one(registry, metrics):
    other = CollectorRegistry()
    ServiceMetrics(other, METHODS).rpc_started(SERVICE, "Play")
    assert value(samples(exposition(registry)), "grpc_server_started_total", **rpc("Play")) == 0
    assert value(samples(exposition(other)), "grpc_server_started_total", **rpc("Play")) == 1
    default = generate_latest(REGISTRY).decode()
    assert "grpc_server_" not in default and "cardrules_" not in default


# Run in a fresh interpreter: prometheus_client chooses multiprocess storage at import.
_MULTIPROCESS_SCRIPT = textwrap.dedent(
    """
    import json, multiprocessing, os, sys, urllib.request

    directory = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    import service.metrics as m
    assert m.multiprocess_enabled()
    assert os.listdir(directory) == [], "a metric was created at import time"

    SERVICE = "cardrules.krypkasino.v1.KrypkasinoService"
    METHODS = {SERVICE: ["NewGame", "Play"]}

    def worker(ok, failed):
        metrics = m.ServiceMetrics(None, METHODS)
        for _ in range(ok + failed):
            metrics.rpc_started(SERVICE, "Play")
        for _ in range(ok):
            metrics.rpc_handled(SERVICE, "Play", "OK", 0.0003)
        for _ in range(failed):
            metrics.rpc_handled(SERVICE, "Play", "InvalidArgument", 0.002)
            metrics.state_token_refused("krypkasino", "TOKEN_UNKNOWN_KEY")
        metrics.move_played("krypkasino", "sweep")

    context = multiprocessing.get_context("fork")
    children = [context.Process(target=worker, args=args) for args in ((3, 1), (4, 2))]
    for child in children:
        child.start()
    for child in children:
        child.join()
        assert child.exitcode == 0, child.exitcode
        m.worker_exited(child.pid)
    files = sorted(os.listdir(directory))

    from service.metrics_http import start_metrics_http
    stop = start_metrics_http(0, m.multiprocess_registry(), host="127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{stop.port}/metrics", timeout=10) as r:
            text = r.read().decode()
    finally:
        stop()
    json.dump({"pids": [c.pid for c in children], "files": files, "text": text}, sys.stdout)
    """
)


def run_python(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_forked_workers_aggregate_in_multiprocess_mode(tmp_path):
    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = run_python(_MULTIPROCESS_SCRIPT, env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    # Each worker wrote its own files; they stay after the worker is gone.
    for pid in result["pids"]:
        assert any(name.endswith(f"_{pid}.db") for name in result["files"])
    found = samples(result["text"])
    play = rpc("Play")
    assert value(found, "grpc_server_started_total", **play) == 10
    assert value(found, "grpc_server_msg_received_total", **play) == 10
    assert value(found, "grpc_server_handled_total", **play, grpc_code="OK") == 7
    assert value(found, "grpc_server_handled_total", **play, grpc_code="InvalidArgument") == 3
    assert value(found, "grpc_server_msg_sent_total", **play) == 7
    assert value(found, "grpc_server_handling_seconds_count", **play) == 10
    assert value(found, "grpc_server_handling_seconds_bucket", **play, le="0.0005") == 7
    assert value(found, "grpc_server_handling_seconds_sum", **play) == pytest.approx(0.0081)
    assert value(found, "cardrules_moves_total", game="krypkasino", kind="sweep") == 2
    assert value(found, "cardrules_sweeps_total", game="krypkasino", kind="sweep") == 2
    refused = "cardrules_state_tokens_refused_total"
    assert value(found, refused, game="krypkasino", reason="TOKEN_UNKNOWN_KEY") == 3
    # Pre-created series aggregate too.
    assert value(found, "grpc_server_handled_total", **rpc("NewGame"), grpc_code="OK") == 0
    assert value(found, "grpc_server_handled_total", **play, grpc_code="Internal") == 0

    # The next start empties the directory it is given: a second run starts from zero.
    clear = "import service.metrics as m; m.clear_multiprocess_dir()"
    environ = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", clear], cwd=ROOT, env=environ, check=True, timeout=60)
    assert not list(tmp_path.glob("*.db"))


def test_multiprocess_registry_refuses_a_late_environment_variable(tmp_path):
    script = textwrap.dedent(
        """
        import os, sys
        import service.metrics as m
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = sys.argv[1]
        try:
            m.multiprocess_registry()
        except RuntimeError as error:
            print("refused:", error)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused:") and "PROMETHEUS_MULTIPROC_DIR" in done.stdout


_KIND_LABELS = {
    pb.MOVE_KIND_CRAWL: "crawl",
    pb.MOVE_KIND_CAPTURE: "capture",
    pb.MOVE_KIND_SWEEP: "sweep",
    pb.MOVE_KIND_DOUBLE_SWEEP: "double_sweep",
}


def answered(runner: CallRunner, method: str, handler: Handler, request: Message) -> Any:
    """``handler``'s answer to ``request`` through ``runner``, as either transport calls
    it; a refusal is raised."""
    outcome = runner.run(SERVICE, method, "grpc", "test", handler, request)
    if outcome.error is not None:
        raise outcome.error
    return outcome.response


def test_domain_counters_count_what_the_api_answered(registry: CollectorRegistry) -> None:
    """Design section 6: games started, moves by kind, sweeps and illegal moves, counted
    from whole games played through the API, against the events its answers carried."""
    metrics = new_metrics(registry)
    api = build_api(ServerConfig(), KeyRing.parse(TEST_KEY), metrics)
    runner = CallRunner(metrics)
    rng = random.Random(3)
    kinds: collections.Counter[str] = collections.Counter()
    out_of_turn = 0
    for seed in (1, 2):
        game = answered(
            runner,
            "NewGame",
            api.new_game,
            pb.NewGameRequest(config=pb.GameConfig(players=2), seed=seed),
        )
        state, view = game.state, game.view
        while view.HasField("turn"):
            seat = view.turn
            token = game.seat_tokens[seat]
            if rng.random() < 0.1:
                with pytest.raises(ServiceError) as refused:
                    answered(
                        runner,
                        "Play",
                        api.play,
                        pb.PlayRequest(
                            state=state,
                            seat=1 - seat,
                            seat_token=game.seat_tokens[1 - seat],
                            move=pb.Move(
                                card=cards_pb2.Card(
                                    rank=cards_pb2.RANK_ACE, suit=cards_pb2.SUIT_SPADES
                                )
                            ),
                        ),
                    )
                assert refused.value.reason == "NOT_YOUR_TURN"
                out_of_turn += 1
            request = pb.LegalMovesRequest(state=state, seat=seat, seat_token=token)
            move = rng.choice(answered(runner, "LegalMoves", api.legal_moves, request).moves)
            played = answered(
                runner,
                "Play",
                api.play,
                pb.PlayRequest(state=state, seat=seat, seat_token=token, move=move.move),
            )
            for event in played.events:
                if event.HasField("crawled"):
                    kinds["crawl"] += 1
                elif event.HasField("captured"):
                    kinds[_KIND_LABELS[event.captured.kind]] += 1
            state, view = played.state, played.view
    found = samples(exposition(registry))
    game_labels = {"game": "krypkasino", "players": "2", "teams": "individual"}
    assert value(found, "cardrules_games_started_total", **game_labels, variant="default") == 2
    counted = {
        kind: value(found, "cardrules_moves_total", game="krypkasino", kind=kind)
        for kind in _KIND_LABELS.values()
    }
    assert counted == {kind: kinds[kind] for kind in _KIND_LABELS.values()}
    assert kinds["sweep"] > 0 and kinds["capture"] > 0 and kinds["crawl"] > 0
    for kind in ("sweep", "double_sweep"):
        assert value(found, "cardrules_sweeps_total", game="krypkasino", kind=kind) == kinds[kind]
    illegal = value(
        found, "cardrules_illegal_moves_total", game="krypkasino", reason="NOT_YOUR_TURN"
    )
    assert illegal == out_of_turn > 0


def domain_counts(registry: CollectorRegistry) -> tuple[float, float, float]:
    """Games started, moves played and illegal moves, over every label."""
    found = samples(exposition(registry))

    def total(name: str) -> float:
        return sum(count for (series, _), count in found.items() if series == name)

    return (
        total("cardrules_games_started_total"),
        total("cardrules_moves_total"),
        total("cardrules_illegal_moves_total"),
    )


def test_a_call_dropped_at_its_deadline_or_failed_by_a_bug_counts_nothing_it_did(
    registry: CollectorRegistry,
) -> None:
    """docs/api.md, DEADLINE_EXCEEDED: an answer ready after the deadline is not sent, so
    the game it started or the move it played (or refused) reached nobody."""
    metrics = new_metrics(registry)
    api = build_api(ServerConfig(), KeyRing.parse(TEST_KEY), metrics)
    runner = CallRunner(metrics)

    def late(handler: Handler) -> Handler:
        return within_deadline(handler, iter((1.0, 0)).__next__)  # passed while it ran

    def reason(method: str, handler: Handler, request: Message) -> str:
        error = runner.run(SERVICE, method, "grpc", "late", handler, request).error
        assert error is not None
        return error.reason

    new_game = pb.NewGameRequest(config=pb.GameConfig(players=2), seed=1)
    assert reason("NewGame", late(api.new_game), new_game) == "DEADLINE_EXCEEDED"
    game = answered(runner, "NewGame", api.new_game, new_game)
    seat = game.view.turn
    request = pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=game.seat_tokens[seat])
    move = answered(runner, "LegalMoves", api.legal_moves, request).moves[0].move
    play = pb.PlayRequest(state=game.state, seat=seat, seat_token=game.seat_tokens[seat], move=move)
    out_of_turn = pb.PlayRequest(
        state=game.state, seat=1 - seat, seat_token=game.seat_tokens[1 - seat], move=move
    )
    assert reason("Play", late(api.play), play) == "DEADLINE_EXCEEDED"
    assert reason("Play", late(api.play), out_of_turn) == "DEADLINE_EXCEEDED"

    def counted_then_crashed(request: Message, info: CallInfo) -> Message:
        info.counts.append(functools.partial(metrics.move_played, "krypkasino", "crawl"))
        raise KeyError("a bug")

    assert reason("Play", counted_then_crashed, play) == "INTERNAL"
    assert domain_counts(registry) == (1, 0, 0)

    answered(runner, "Play", api.play, play)
    assert reason("Play", api.play, out_of_turn) == "NOT_YOUR_TURN"
    assert domain_counts(registry) == (1, 1, 1)


def fill(values: Any, count: int) -> None:  # prometheus_client is untyped
    """``count`` new series of about 230 bytes each: 300 outgrow the first map."""
    for number in range(count):
        values.write_value(f"series {number:04} " + "x" * 200, float(number), 0.0)


@pytest.mark.parametrize(
    "code",
    [errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS],
    ids=["EOPNOTSUPP", "EINVAL", "ENOSYS"],  # not errorcode: EOPNOTSUPP is ENOTSUP on Linux
)
def test_a_file_of_values_grows_sparse_where_space_cannot_be_reserved(tmp_path, monkeypatch, code):
    """musl's posix_fallocate, unlike glibc's, does not write the blocks itself on a
    filesystem without fallocate: the file grows as prometheus_client grows it
    (service/value_space.py). Each error that means "cannot reserve here": EOPNOTSUPP,
    EINVAL (what POSIX lists for a filesystem that does not support it) and ENOSYS."""

    def unsupported(descriptor: int, offset: int, size: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    path = tmp_path / "counter_1.db"
    values: Any = _ReservedMmapedDict(str(path))
    fill(values, 300)
    assert path.stat().st_size == 2 * VALUE_FILE_BYTES
    values.close()
    assert len(list(values.read_all_values_from_file(str(path)))) == 300


def test_a_file_of_values_is_refused_where_reserving_fails_otherwise(tmp_path, monkeypatch):
    """Only a filesystem that cannot reserve gets a sparse file: any other error of
    posix_fallocate (ENOSPC, a full folder) is ValueFileFullError, and no file is left
    behind, instead of a sparse file that a full folder would answer with SIGBUS
    (docs/operations.md, "Workers")."""

    def full(descriptor: int, offset: int, size: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    path = tmp_path / "counter_1.db"
    with pytest.raises(ValueFileFullError) as refused:
        _ReservedMmapedDict(str(path))
    assert refused.value.errno == errno.ENOSPC
    assert refused.value.filename == str(path)
    assert list(tmp_path.iterdir()) == []


def test_a_file_of_values_opened_again_keeps_its_values(tmp_path):
    """A worker that gets a dead worker's pid opens that worker's file of values again,
    which ``worker_exited`` keeps so that totals never go back: only a file without
    content is made and reserved anew, never one with values, which would be zeroed."""
    path = tmp_path / "counter_1.db"
    first: Any = _ReservedMmapedDict(str(path))
    fill(first, 300)  # past the first map: the file has grown
    first.write_value("games started", 7.0, 0.0)
    first.close()
    reopened: Any = _ReservedMmapedDict(str(path))
    try:
        assert reopened.read_value("games started") == (7.0, 0.0)
        assert reopened.read_value("series 0299 " + "x" * 200) == (299.0, 0.0)
        assert path.stat().st_size == 2 * VALUE_FILE_BYTES
    finally:
        reopened.close()


FULL_SCRIPT = """
import os, sys
from service.metrics import _ReservedMmapedDict
from service.value_space import ValueFileFullError
try:
    _ReservedMmapedDict(sys.argv[1])
except ValueFileFullError as error:
    print("refused:", error)
print("left:", os.listdir(os.path.dirname(sys.argv[1])))
"""


def on_own_mount(folder: Path, mount: str, script: str) -> subprocess.CompletedProcess[str]:
    """``script`` run with ``folder/counter_1.db`` as its argument, with a filesystem
    mounted on ``folder`` by ``mount`` (``mount -t ... "$1"``) in a mount namespace of its
    own, as for the tmpfs of test_process_lifecycle."""
    folder.mkdir()
    launcher = f'{mount} "$1" || exit 1\nshift\nexec "$@"\n'
    command = in_mount_namespace(launcher, str(folder))
    filename = str(folder / "counter_1.db")
    finished = subprocess.run(
        (*command, sys.executable, "-c", script, filename),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert finished.returncode == 0, finished.stderr
    return finished


def test_a_new_file_of_values_without_room_is_refused_and_not_left_behind(tmp_path):
    """An empty file left in the folder would fail every later scrape of it (the
    collector cannot read a file of 0 bytes), as long as the folder is in use. A tmpfs
    smaller than one file of values."""
    finished = on_own_mount(tmp_path / "full", "mount -t tmpfs -o size=16k tmpfs", FULL_SCRIPT)
    refused, left = finished.stdout.splitlines()
    assert refused.startswith("refused:") and "no room for" in refused
    assert left == "left: []"


# A worker's metrics in a folder that something else filled, and a file of values whose
# reserved room is taken: each new series needs more. Prints the log lines of three.
LOST_ONCE_SCRIPT = """
import json, os, sys
folder = os.path.dirname(sys.argv[1])
os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder
import structlog.testing
from prometheus_client import CollectorRegistry, Counter
from service.metrics import reserve_value_files, variant_label
from service.server import new_metrics

reserve_value_files()
metrics = new_metrics(CollectorRegistry())
filler = os.open(os.path.join(folder, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
try:
    while os.write(filler, bytes(65536)):
        pass
except OSError:  # ENOSPC: the folder is full
    pass
room = Counter("room", "x", ["n"], registry=None)  # in the same file as the service's
taken = 0
try:
    while True:
        room.labels(str(taken))
        taken += 1
except OSError:  # ValueFileFullError: the file's room is taken
    pass
with structlog.testing.capture_logs() as logs:
    for flag in ("first", "second", "third"):
        metrics.game_started("krypkasino", 2, "individual", variant_label((flag,)))
print(json.dumps(logs))
"""


def test_series_lost_in_a_full_metrics_folder_are_logged_once(tmp_path):
    """docs/operations.md ("metrics values lost ... once"): every new series of a full
    folder is lost, but a worker playing new variants would write a line for each. A
    tmpfs, filled once the worker's files of values are there."""
    finished = on_own_mount(tmp_path / "full", "mount -t tmpfs -o size=1m tmpfs", LOST_ONCE_SCRIPT)
    logs = json.loads(finished.stdout)
    assert [line["event"] for line in logs] == ["metrics values lost"]
    assert logs[0]["series"] == "cardrules_games_started_total"
    assert "no room for" in logs[0]["error"]


# Scrapes the folder (as the metrics server does) while a worker makes its file of values.
SCRAPED_WHILE_MADE_SCRIPT = """
import os, sys
os.environ["PROMETHEUS_MULTIPROC_DIR"] = sys.argv[1]
from prometheus_client.multiprocess import MultiProcessCollector
import service.metrics

real_reserve = service.metrics.reserve

def scraped_meanwhile(descriptor, size, filename):
    list(MultiProcessCollector(None).collect())
    real_reserve(descriptor, size, filename)

service.metrics.reserve = scraped_meanwhile
service.metrics._ReservedMmapedDict(os.path.join(sys.argv[1], "counter_1.db"))
print(sorted(os.listdir(sys.argv[1])))
"""


def test_a_scrape_while_a_worker_makes_its_file_of_values_reads_no_empty_file(tmp_path):
    """The file was made empty, then reserved: a scrape in between failed whole
    (prometheus_client reads its first 4 bytes) and the metrics answered 503 as a
    worker started (a test that scraped right after the start saw it under load)."""
    done = subprocess.run(
        [sys.executable, "-c", SCRAPED_WHILE_MADE_SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "['counter_1.db']"


RAMFS_SCRIPT = """
import sys
from service.metrics import _ReservedMmapedDict
values = _ReservedMmapedDict(sys.argv[1])
for number in range(300):
    values.write_value(f"series {number:04} " + "x" * 200, float(number), 0.0)
"""


def test_a_file_of_values_grows_on_a_filesystem_without_fallocate(tmp_path):
    """On ramfs (as on NFS) glibc reserves the space by writing a byte to each block,
    which it refuses to do through a descriptor opened to append (EBADF): every new
    series past the first 64 KiB was lost as if the folder were full. A ramfs in a
    mount namespace of its own."""
    on_own_mount(tmp_path / "ramfs", "mount -t ramfs ramfs", RAMFS_SCRIPT)


def test_process_series_with_workers_follow_the_live_workers():
    """``process_*`` of the supervisor and of each worker still in the supervisor's
    table, by number: a worker it reaped (removed from the table) leaves the scrape."""
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        workers = {worker.pid: 3}
        registry = CollectorRegistry()
        add_workers_process_metrics(registry, workers)

        def numbers(name: str) -> set[str]:
            found = samples(generate_latest(registry).decode())
            return {dict(labels)["worker"] for sample, labels in found if sample == name}

        assert numbers("process_resident_memory_bytes") == {SUPERVISOR, "3"}
        assert numbers("process_open_fds") == {SUPERVISOR, "3"}
        del workers[worker.pid]
        assert numbers("process_resident_memory_bytes") == {SUPERVISOR}
    finally:
        worker.kill()
        worker.wait()
