"""The image's health check asks the server directly, whatever proxy the environment
names (service/healthcheck.py; docs/operations.md, "Behind an egress proxy").

grpc sends a channel, loopback too, through the proxy of ``grpc_proxy``,
``https_proxy`` or ``http_proxy`` unless ``no_proxy`` lists the host, and Docker's
proxy settings put ``http_proxy`` into every container: with the proxy unreachable
the check called a serving server unhealthy, and the VM's timer would have
restarted it. Real processes, the shared real server, and a proxy port where
nothing listens.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.service.server_process import ServerProcess, free_port, server_environment

#: A cluster's usual no_proxy, which does not cover loopback for grpc.
CLUSTER_NO_PROXY = ".svc,.cluster.local,10.0.0.0/8"

#: A plain channel's call, as the check made it before: the premise that ``environ``
#: sends grpc through the proxy at all.
PLAIN_CALL = """
import sys, grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
with grpc.insecure_channel(sys.argv[1]) as channel:
    try:
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    except grpc.RpcError as error:
        print(error.code().name, error.details())
        sys.exit(1)
"""


def _environ(server: ServerProcess, variable: str) -> dict[str, str]:
    proxy = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    return server_environment(
        {
            "CARDRULES_HOST": "127.0.0.1",
            "CARDRULES_GRPC_PORT": str(server.grpc_port),
            variable: proxy,
            variable.upper(): proxy,
            "no_proxy": CLUSTER_NO_PROXY,
            "NO_PROXY": CLUSTER_NO_PROXY,
        }
    )


@pytest.mark.parametrize("variable", ["http_proxy", "https_proxy", "grpc_proxy"])
def test_the_health_check_of_a_serving_server_ignores_an_unreachable_proxy(
    server: ServerProcess, variable: str
) -> None:
    environ = _environ(server, variable)
    plain = subprocess.run(
        [sys.executable, "-c", PLAIN_CALL, server.target],
        env=environ,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert plain.returncode == 1, "grpc no longer reads the proxy: this test proves nothing"
    assert plain.stdout.startswith("UNAVAILABLE"), plain.stdout
    checked = subprocess.run(
        [sys.executable, "-m", "service.healthcheck"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")
