"""The image's ``HEALTHCHECK`` (Dockerfile; docs/operations.md, "The image"): ask the
gRPC health service for ``readiness`` where the server listens, and exit 0 if it
answers SERVING, else 1.

The check runs apart from the server (Docker and Podman start it beside PID 1), so
it cannot see the server's flags; it reads the server's ``CARDRULES_*`` variables
with the server's own parser (``service.config.resolve``). A value the server takes
is read alike (``50051 `` with a space: the check makes ``127.0.0.1:50051``),
and one the server refuses is reported with the server's own message, so the check
and the server never disagree about the address.

Run as ``python -m service.healthcheck``, with no arguments: ``-h`` or ``--help``
alone prints what it reads, and any other argument is refused, with a ``-h`` too
(a ``--grpc-port`` would otherwise be ignored, checking another port than meant).
Never exit status 2: Docker reserves it, so a refused argument exits 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from service.config import (
    ConfigValueError,
    ServerConfig,
    add_server_arguments,
    env_name,
    hide_keys,
    host_port,
    resolve,
)
from service.listen import is_wildcard

#: The health service name the check asks for: the one that turns NOT_SERVING on
#: SIGTERM, as the Kubernetes readiness probe's (k8s/base/deployment.yaml).
READINESS = "readiness"
#: Within the Dockerfile's ``HEALTHCHECK --timeout`` (5 s), with room to start Python.
TIMEOUT_SECONDS = 3.0
HEALTHY = 0
UNHEALTHY = 1
#: Settings the check has no use for: a keys file that became unreadable since the
#: server started must not make a serving container unhealthy.
_NOT_READ = frozenset(env_name(name) for name in ("state_keys", "state_keys_file"))
#: Where a wildcard listener is reached: grpc serves 0.0.0.0 and :: on IPv4 too
#: (service.listen), and IPv4 loopback exists where IPv6 may be switched off.
_LOOPBACK = "127.0.0.1"


class CheckError(Exception):
    """Why there is no address to ask; the message says what to change."""


def server_config(environ: Mapping[str, str]) -> ServerConfig:
    """The configuration ``cardrules serve`` resolves from ``environ`` and no flags,
    the state keys aside."""
    parser = argparse.ArgumentParser(prog="cardrules serve")
    add_server_arguments(parser)
    wanted = {name: value for name, value in environ.items() if name not in _NOT_READ}
    try:
        return resolve(parser.parse_args([]), wanted)
    except ConfigValueError as error:
        # As ``cardrules serve`` prints it: a key wired to another setting never shown.
        refusal = hide_keys(str(error))
        raise CheckError(f"the server refuses its configuration: {refusal}") from None


def target(config: ServerConfig) -> str:
    """The gRPC address the server listens on, as seen from inside its container."""
    if config.grpc_port == 0:
        # The server chose a free port and logged it; nothing outside it knows which.
        raise CheckError(
            f"{env_name('grpc_port')} is 0 (any free port): the health check needs a fixed port"
        )
    host = _LOOPBACK if is_wildcard(config.host) else config.host
    return host_port(host, config.grpc_port)


#: grpc sends a channel through the proxy of ``grpc_proxy``, ``https_proxy`` or
#: ``http_proxy`` (loopback too, unless ``no_proxy`` lists it), and Docker's proxy
#: settings put ``http_proxy`` into every container: the check of a serving server
#: failed at an unreachable proxy. It asks the server's own address, never through one.
_NO_PROXY = (("grpc.enable_http_proxy", 0),)


def ask(address: str) -> str:
    """The status name the health service at ``address`` gives for readiness, asked
    directly whatever proxy the environment names (docs/operations.md, "Behind an
    egress proxy")."""
    with grpc.insecure_channel(address, options=_NO_PROXY) as channel:
        # Typed Any: grpcio-health-checking's type stubs lack the stub's methods.
        stub: Any = health_pb2_grpc.HealthStub(channel)
        reply = stub.Check(
            health_pb2.HealthCheckRequest(service=READINESS), timeout=TIMEOUT_SECONDS
        )
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))


def check(environ: Mapping[str, str]) -> int:
    """0 if the server ``environ`` configures answers SERVING for readiness, else 1;
    the reason for a 1 goes to stderr, which Docker keeps in the health log."""
    try:
        address = target(server_config(environ))
    except CheckError as error:
        print(f"unhealthy: {error}", file=sys.stderr)
        return UNHEALTHY
    try:
        status = ask(address)
    except grpc.RpcError as error:
        print(f"unhealthy: {address}: {error.code().name}: {error.details()}", file=sys.stderr)
        return UNHEALTHY
    if status != "SERVING":
        print(f"unhealthy: {address}: {READINESS} is {status}", file=sys.stderr)
        return UNHEALTHY
    return HEALTHY


#: What ``--help`` prints: the check takes its address from the server's variables.
USAGE = f"""\
usage: python -m service.healthcheck

Ask the cardrules gRPC health service for {READINESS} where the server listens,
and exit 0 if it answers SERVING, else 1 with the reason on stderr.
It takes no arguments: it reads the server's variables, {env_name("host")} (a
wildcard host is asked on {_LOOPBACK}) and {env_name("grpc_port")}, with the
server's own parser, which also reads its other CARDRULES_* settings (the
state keys aside): a value the server refuses makes the check fail.
"""


def main(argv: Sequence[str] | None = None) -> int:
    """The check, or its usage for a lone ``-h`` or ``--help``; any other arguments are
    refused with status 1 and the variables to set instead: a ``-h`` among them must
    not hide the others, which would go unrefused (docs/operations.md)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments in (["-h"], ["--help"]):
        print(USAGE, end="")
        return HEALTHY
    if arguments:
        print(
            f"service.healthcheck: takes no arguments, not {' '.join(arguments)!r}: set "
            f"{env_name('host')} and {env_name('grpc_port')} instead (see --help)",
            file=sys.stderr,
        )
        return UNHEALTHY
    return check(os.environ)


if __name__ == "__main__":
    sys.exit(main())
