"""``python -m service.healthcheck`` takes no arguments (service/healthcheck.py;
docs/operations.md, "A hung server, and restarts, without Kubernetes"): ``--help``
ran a check instead of saying what the check reads, and ``--grpc-port`` was
ignored, checking the port of ``CARDRULES_GRPC_PORT`` instead. Real processes, and
the shared real server."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from service.healthcheck import TIMEOUT_SECONDS
from tests.deploy.manifests import DOCKERFILE
from tests.service.server_process import ServerProcess, free_port, server_environment
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
