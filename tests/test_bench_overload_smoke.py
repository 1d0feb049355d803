"""The overload benchmark still runs end to end (a smoke run; timings are never asserted)."""

from __future__ import annotations

import contextlib
import http.server
import json
import multiprocessing
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from grpc_health.v1 import health_pb2
from grpc_health.v1.health import HealthServicer

from bench import overload
from bench.common import Json
from bench.server import Ports, cardrules_serve
from service.krypkasino_api import SERVICE_NAME
from tests.deploy.manifests import container
from tests.deploy.rendering import load_documents
from tests.process_groups import assert_sigterm_stops_the_whole_run
from tests.service.grpc_helpers import health_server

ROOT = Path(__file__).resolve().parents[1]


def test_quick_overload_run_loads_each_transport_and_probes(tmp_path: Path) -> None:
    out = tmp_path / "overload.json"
    command = [sys.executable, "-m", "bench", "overload", "--quick", "--seconds", "2"]
    done = subprocess.run(
        [*command, "--http", "20", "--grpc", "20", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "A server past saturation" in done.stdout
    report = json.loads(out.read_text())
    assert report["params"] == {"http": 20, "grpc": 20, "seconds": 2.0}
    scenarios = {row["scenario"]: row for row in report["scenarios"]}
    assert list(scenarios) == ["HTTP", "HTTP and gRPC", "gRPC"]
    # Each scenario loads the transports it names, and only those.
    assert scenarios["HTTP"]["http_per_s"] > 0 == scenarios["HTTP"]["grpc_per_s"]
    assert scenarios["gRPC"]["grpc_per_s"] > 0 == scenarios["gRPC"]["http_per_s"]
    assert scenarios["HTTP and gRPC"]["http_per_s"] > 0
    assert scenarios["HTTP and gRPC"]["grpc_per_s"] > 0
    for row in scenarios.values():
        assert row["calls_failed"] == 0, row
        assert 0 <= row["probe_failures"] <= row["probes"] and row["probes"] > 0
        assert 0 < row["probe_p50_ms"] <= row["probe_max_ms"]


ANSWER_AFTER_SECONDS = 1.0
WINDOW_SECONDS = 0.3


@contextlib.contextmanager
def late_servers() -> Iterator[Ports]:
    """Real loopback servers whose every ``Play``, over gRPC and over HTTP, ends only
    after a load window of ``WINDOW_SECONDS`` is over."""

    def play(request: bytes, context: grpc.ServicerContext) -> bytes:
        time.sleep(ANSWER_AFTER_SECONDS)
        return pb.PlayResponse().SerializeToString()

    class Late(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(ANSWER_AFTER_SECONDS)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: object) -> None:
            pass

    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(play)
    grpc_server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(SERVICE_NAME, {"Play": handler})]
    )
    grpc_port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    http_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Late)
    threading.Thread(target=http_server.serve_forever, daemon=True).start()
    try:
        yield Ports(grpc=grpc_port, http=http_server.server_address[1])
    finally:
        http_server.shutdown()
        http_server.server_close()
        grpc_server.stop(None)


def test_calls_that_end_after_the_window_are_not_counted_as_served() -> None:
    """Play/s is the calls ended in the window over its seconds: every call in flight when
    it ends was counted too, which inflated a starved transport's figure (gRPC beside HTTP:
    495 counted in a 5 s window, 295 of them ended in it)."""
    spawn = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue[Json] = spawn.Queue()
    with late_servers() as ports:
        loads = [
            spawn.Process(
                target=overload.http_load,
                args=(overload.Load(ports.http, 4, WINDOW_SECONDS), b"{}", results),
            ),
            spawn.Process(
                target=overload.grpc_load,
                args=(overload.Load(ports.grpc, 4, WINDOW_SECONDS), b"", results),
            ),
        ]
        for process in loads:
            process.start()
        counted = {}
        for _ in loads:
            result = results.get(timeout=60)
            counted[result["transport"]] = (result["served"], result["failed"])
        for process in loads:
            process.join()
    assert counted == {"http": (0, 0), "grpc": (0, 0)}


def test_sigterm_stops_the_load_processes_at_once() -> None:
    """Interrupted, the run stopped its server but left its load processes calling it at
    full CPU until their window ended, and waited for them (a benchmark review)."""
    assert_sigterm_stops_the_whole_run(
        ["overload", "--quick", "--seconds", "120"],
        lambda line: "loading for 120 s" in line,  # the first scenario's loads are starting
        settle_seconds=overload.SETTLE_SECONDS + 1,  # they load, and the probes run
    )


def test_a_probe_fails_unless_liveness_answers_serving() -> None:
    """As the kubelet's gRPC probe does: an answer other than SERVING, or none (a port
    nothing listens on), is a failed probe."""
    serving = health_pb2.HealthCheckResponse.SERVING
    for status, failed in ((serving, 0), (health_pb2.HealthCheckResponse.NOT_SERVING, 1)):
        with health_server("liveness", status) as port:
            seconds, failures = overload.probe(port, time.monotonic())
        assert (len(seconds), failures) == (1, failed), status
    with health_server("liveness", serving) as port:
        pass  # free once its server stopped
    seconds, failures = overload.probe(port, time.monotonic())
    assert (len(seconds), failures) == (1, 1)


def test_a_probe_that_gets_no_answer_gives_up_at_the_manifests_liveness_timeout() -> None:
    """Each probe has the liveness probe's ``timeoutSeconds`` (k8s/base/deployment.yaml):
    a server that never answers fails it, once that timeout has passed, and the run goes on."""
    deployment = load_documents(ROOT / "k8s" / "base" / "deployment.yaml")
    liveness = container(deployment)["livenessProbe"]
    assert liveness["timeoutSeconds"] == overload.PROBE_TIMEOUT_SECONDS
    released = threading.Event()

    class Unanswering(HealthServicer):
        def Check(  # noqa: N802 (grpc's name)
            self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
        ) -> health_pb2.HealthCheckResponse:
            released.wait()
            return super().Check(request, context)

    serving = health_pb2.HealthCheckResponse.SERVING
    with health_server("liveness", serving, Unanswering()) as port:
        try:
            seconds, failures = overload.probe(port, time.monotonic())
        finally:
            released.set()
    assert failures == 1 and len(seconds) == 1
    assert seconds[0] >= overload.PROBE_TIMEOUT_SECONDS


def test_refused_http_calls_count_as_failed() -> None:
    """A call answered with anything but 200 failed, though the server answered it."""
    answered: multiprocessing.Queue[Json] = multiprocessing.get_context("spawn").Queue()
    with cardrules_serve() as ports:
        overload.http_load(overload.Load(ports.http, 2, 0.5), b"{}", answered)  # no state
    counted = answered.get(timeout=30)
    assert counted["transport"] == "http" and counted["served"] == 0
    assert isinstance(counted["failed"], int) and counted["failed"] > 0
