"""An unexpected error once gRPC serves (docs/operations.md, "Log lines"): the process's
one ``server crashed`` (a worker's ``worker crashed``) JSON line and exit status 1, and
nothing on stderr. ``run_servers`` ends what it started: a gRPC server left running
when the event loop closed was shut down by grpc's ``Server.__del__``, which printed
``Exception ignored in ... Event loop is closed`` and a traceback after the JSON line;
and the closed loop left SIGTERM to its default action, so a crashing worker that the
supervisor's SIGTERM reached (a sibling had crashed) died of it, without its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.service.server_process import events, free_ports, loaded_at_start, serve_and_fail

# Test-only fault, loaded by the server's interpreter at start (``sitecustomize`` on
# PYTHONPATH): marking the health service SERVING, the first step after gRPC has
# started, raises an error no code path expects. Only a process that runs the servers
# gets there: a single process, or each worker (never their supervisor).
FAULT = """
import grpc_health.v1._async


async def _fail(*_args, **_kwargs):
    raise RuntimeError("fault injected once gRPC serves")


grpc_health.v1._async.HealthServicer.set = _fail
"""


# The same, with an error whose text, made as the crash line is written (after the event
# loop has closed), sends its own process the SIGTERM that a supervisor forwards, or a
# kubelet sends, in that moment.
FAULT_SIGNALLED_WHILE_LOGGED = """
import os
import signal

import grpc_health.v1._async


class SignalledError(RuntimeError):
    def __str__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        return "fault injected once gRPC serves"


async def _fail(*_args, **_kwargs):
    raise SignalledError()


grpc_health.v1._async.HealthServicer.set = _fail
"""

RUNS = pytest.mark.parametrize(
    ("args", "crash_event", "crashes"),
    [((), "server crashed", 1), (("--workers", "2"), "worker crashed", 2)],
    ids=["single process", "workers"],
)


@RUNS
@pytest.mark.parametrize(
    "fault", [FAULT, FAULT_SIGNALLED_WHILE_LOGGED], ids=["error", "sigterm while logged"]
)
def test_an_error_after_grpc_started_is_only_the_crash_line(
    tmp_path: Path, fault: str, args: tuple[str, ...], crash_event: str, crashes: int
):
    path = loaded_at_start(tmp_path, fault)
    # Fixed ports, which workers share; the metrics served too.
    http_port, metrics_port = map(str, free_ports(2))
    done = serve_and_fail(
        "--http-port", http_port, "--metrics-port", metrics_port, *args, env={"PYTHONPATH": path}
    )
    assert done.returncode == 1
    assert done.stderr == ""  # no "Exception ignored in: <function Server.__del__"
    lines = events(done.stdout)  # JSON lines only
    crashed = [line for line in lines if line["event"] == crash_event]
    assert len(crashed) == crashes
    assert all(line["level"] == "error" for line in crashed)
    assert "fault injected once gRPC serves" in str(crashed[0]["exception"])
    assert [line["event"] for line in lines].count("metrics") == 1
    assert not [line for line in lines if line["event"] == "listening"]
