"""``python -m service.healthcheck`` takes no arguments (service/healthcheck.py;
docs/operations.md, "A hung server, and restarts, without Kubernetes"): ``--help``
ran a check instead of saying what the check reads, and ``--grpc-port`` was
ignored, checking the port of ``CARDRULES_GRPC_PORT`` instead. And what it asks
where: readiness, at the address the server's variables give (a wildcard on
127.0.0.1), never minding the state keys. Real processes, and real servers."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from grpc_health.v1 import health_pb2

from service.healthcheck import TIMEOUT_SECONDS
from tests.deploy.manifests import DOCKERFILE
from tests.service.grpc_helpers import health_server
from tests.service.server_process import ServerProcess, free_port, running, server_environment
from tests.service.silent_listener import silent_server

CHECK = [sys.executable, "-m", "service.healthcheck"]


def _check(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CHECK, *args], env=server_environment(env), capture_output=True, text=True, timeout=30
    )


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_names_the_variables_read_and_exits_0(flag: str) -> None:
    # A port where nothing listens: the help must not run the check.
    done = _check(flag, env={"CARDRULES_GRPC_PORT": str(free_port())})
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("usage: python -m service.healthcheck\n")
    assert "CARDRULES_HOST" in done.stdout and "CARDRULES_GRPC_PORT" in done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("--grpc-port",),
        ("--host", "127.0.0.1"),
        ("check",),
        ("x", "-h"),
        ("--help", "--grpc-port", "50051"),
        ("-h", "-h"),
    ],
)
def test_an_argument_is_refused_with_the_variables_to_set_and_exit_1(
    server: ServerProcess, args: tuple[str, ...]
) -> None:
    """Exit 1, never 2 (Docker reserves it). The port of a serving server given as a
    flag, its variable pointing nowhere: not a check of the wrong port. A ``-h`` among
    other arguments is no help: it printed the usage and exited 0, the others unrefused."""
    given = (*args, str(server.grpc_port)) if args == ("--grpc-port",) else args
    done = _check(*given, env={"CARDRULES_GRPC_PORT": str(free_port())})
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"service.healthcheck: takes no arguments, not {' '.join(given)!r}: set "
        "CARDRULES_HOST and CARDRULES_GRPC_PORT instead (see --help)\n"
    )


def test_without_arguments_it_checks_as_the_image_runs_it(server: ServerProcess) -> None:
    env = {"CARDRULES_HOST": "127.0.0.1", "CARDRULES_GRPC_PORT": str(server.grpc_port)}
    done = _check(env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_a_server_that_never_answers_fails_the_check_within_dockers_timeout() -> None:
    """A hung server (it takes the connection, never a byte back) fails the check with
    exit 1 and DEADLINE_EXCEEDED on stderr, its own deadline's (service/healthcheck.py,
    ``TIMEOUT_SECONDS``), which leaves a second for Python's start within the
    Dockerfile's ``HEALTHCHECK --timeout``: past it Docker kills the check, and its
    health log keeps no reason. A deadline of 30 s met grpc's own connect timeout
    first, at about 20 s (UNAVAILABLE)."""
    with silent_server() as address:
        port = address.rpartition(":")[2]
        done = _check(env={"CARDRULES_HOST": "127.0.0.1", "CARDRULES_GRPC_PORT": port})
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(f"unhealthy: {address}: DEADLINE_EXCEEDED: "), done.stderr
    [docker_timeout] = re.findall(
        r"^HEALTHCHECK .*--timeout=(\d+)s", DOCKERFILE.read_text(), re.MULTILINE
    )
    assert int(docker_timeout) - 1 >= TIMEOUT_SECONDS


def test_a_draining_server_fails_the_check_with_its_readiness_on_stderr() -> None:
    """From SIGTERM on, readiness is NOT_SERVING while the server still answers (its
    drain delay): the check fails then, and says why on stderr, which Docker keeps in
    the container's health log."""
    with running(("--drain-delay-seconds", "8")) as server:
        server.process.terminate()
        server.wait_for_logs("draining")
        done = _check(env={"CARDRULES_GRPC_PORT": str(server.grpc_port)})
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == f"unhealthy: 127.0.0.1:{server.grpc_port}: readiness is NOT_SERVING\n"
        assert server.terminate() == 0


@pytest.mark.parametrize(
    "keys",
    [{"CARDRULES_STATE_KEYS_FILE": "/nonexistent/keys"}, {"CARDRULES_STATE_KEYS": "not-a-key"}],
    ids=["unreadable_keys_file", "invalid_keys"],
)
def test_the_state_keys_settings_are_not_read(server: ServerProcess, keys: dict[str, str]) -> None:
    """A keys file that became unreadable since the server started, or keys the server
    would refuse at its next start, leave a serving server healthy."""
    done = _check(env={"CARDRULES_GRPC_PORT": str(server.grpc_port), **keys})
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_a_named_host_is_asked_on_that_address() -> None:
    """A server on another loopback address than 127.0.0.1 is asked there."""
    with running(("--host", "127.0.0.2")) as server:
        env = {"CARDRULES_HOST": "127.0.0.2", "CARDRULES_GRPC_PORT": str(server.grpc_port)}
        done = _check(env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_a_wildcard_host_is_asked_on_127_0_0_1() -> None:
    port = free_port()  # nothing listens there
    for host in ({}, {"CARDRULES_HOST": "::"}):
        done = _check(env={"CARDRULES_GRPC_PORT": str(port), **host})
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr.startswith(f"unhealthy: 127.0.0.1:{port}: UNAVAILABLE: "), done.stderr
    help_text = " ".join(_check("--help", env={}).stdout.split())
    assert "(a wildcard host is asked on 127.0.0.1)" in help_text


def test_port_0_fails_the_check_saying_it_needs_a_fixed_port() -> None:
    done = _check(env={"CARDRULES_GRPC_PORT": "0"})
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "unhealthy: CARDRULES_GRPC_PORT is 0 (any free port): the health check needs a fixed port\n"
    )


def test_a_readiness_neither_serving_nor_not_serving_fails_the_check() -> None:
    """service/healthcheck.py: exit 0 on SERVING alone. Another gRPC service's health
    servicer on the port (a wrong port) may answer UNKNOWN, which is no server ready."""
    with health_server("readiness", health_pb2.HealthCheckResponse.UNKNOWN) as port:
        done = _check(env={"CARDRULES_GRPC_PORT": str(port)})
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"unhealthy: 127.0.0.1:{port}: readiness is UNKNOWN\n"
