"""A wildcard host on IPv4 and IPv6 alike for all three ports, as gRPC serves it, and on
IPv4 alone on a machine without IPv6; a name on the same addresses on all three
(docs/operations.md, "Configuration"; ``service.listen``). Real processes on loopback.

Whether this machine has IPv6 decides what the tests expect, never whether they
run: without it, they check the IPv4 fallback instead.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import pytest
from grpc_health.v1 import health_pb2

from service.listen import (
    dual_stack,
    ipv6_available,
    is_wildcard,
    listen_hosts,
    resolved_addresses,
)
from tests.service.grpc_helpers import health
from tests.service.server_process import (
    ServerProcess,
    cannot_listen_line,
    events,
    free_ports,
    port_taken,
    running,
    serve_and_fail,
    server_environment,
)

HAS_IPV6 = ipv6_available()

# Runs the server's command (its arguments) in a Python whose sockets cannot be IPv6,
# as on a kernel without IPv6 (EAFNOSUPPORT). grpc core makes its sockets in C, so only
# the HTTP gateway and the metrics port, the Python ones, see no IPv6.
NO_IPV6 = (
    sys.executable,
    "-c",
    """
import errno, runpy, socket, sys

class NoIPv6(socket.socket):
    def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
        if family == socket.AF_INET6:
            raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
        super().__init__(family, type, proto, fileno)

socket.socket = NoIPv6
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
""",
)


def fixed_ports(host: str | None, *extra: str) -> tuple[str, ...]:
    """Flags for fixed ports (workers need them) on ``host`` (None: the default, 0.0.0.0)."""
    grpc_port, http_port, metrics_port = free_ports(3)
    ports = ("--grpc-port", str(grpc_port), "--http-port", str(http_port))
    return (
        *(("--host", host) if host is not None else ()),
        *ports,
        "--metrics-port",
        str(metrics_port),
        *extra,
    )


def url(address: str, port: int, path: str) -> str:
    return f"http://{f'[{address}]' if ':' in address else address}:{port}{path}"


def answers(address: str, port: int, path: str) -> bool:
    """Whether ``path`` answers 200 at ``address``; False if the connection is refused."""
    try:
        with urllib.request.urlopen(url(address, port, path), timeout=10) as reply:
            return bool(reply.status == 200)
    except urllib.error.URLError as error:
        if isinstance(error.reason, ConnectionRefusedError):
            return False
        raise


def grpc_serving(address: str, port: int) -> bool:
    target = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    with grpc.insecure_channel(target) as channel:
        reply = health(channel).Check(
            health_pb2.HealthCheckRequest(service="readiness"), timeout=10
        )
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def served_on(server: ServerProcess) -> list[object]:
    """The addresses the ``listening`` line says gRPC and HTTP are served on, then those
    the ``metrics`` line says the metrics port is."""
    [listening] = server.wait_for_logs("listening")
    [metrics] = server.wait_for_logs("metrics")
    return [listening["addresses"], metrics["addresses"]]


def refused_call(server: ServerProcess, address: str) -> None:
    """A call that is refused (STATE_MISSING) but logged, with its peer and worker."""
    score = urllib.request.Request(
        url(address, server.http_port, "/v1/krypkasino:score"),
        data=b"{}",
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(score, timeout=10)


@pytest.mark.parametrize("host", [None, "0.0.0.0", "::", "[::]"])
def test_a_wildcard_host_serves_grpc_http_and_metrics_on_ipv4_and_ipv6(host):
    """HTTP and metrics listened on 0.0.0.0 for IPv4 alone while gRPC served IPv6 too:
    on an IPv6 cluster a pod went Ready with HTTP and /metrics out of reach. An IPv4
    client stays an IPv4 peer in the request line, as gRPC spells it. The start's lines
    name both wildcards as the addresses served."""
    with running(fixed_ports(host), loopback_flags=False) as server:
        assert served_on(server) == [["0.0.0.0", "::"] if HAS_IPV6 else ["0.0.0.0"]] * 2
        for address in ("127.0.0.1", "::1"):
            reachable = address == "127.0.0.1" or HAS_IPV6
            assert not reachable or grpc_serving(address, server.grpc_port)
            assert answers(address, server.http_port, "/healthz") == reachable, address
            assert answers(address, server.metrics_port, "/metrics") == reachable, address
        refused_call(server, "127.0.0.1")
        [line] = server.wait_for_logs("request")
        assert str(line["peer"]).startswith("ipv4:127.0.0.1:")
        if HAS_IPV6:
            refused_call(server, "::1")
            line = server.wait_for_logs("request", 2)[1]
            assert str(line["peer"]).startswith("ipv6:[::1]:")


def test_without_ipv6_a_wildcard_host_serves_http_and_metrics_on_ipv4_alone():
    """A kernel without IPv6 refuses IPv6 sockets (EAFNOSUPPORT): the server still starts,
    on IPv4, as gRPC does. gRPC's own sockets are made in C, outside the simulation."""
    with running(fixed_ports(None), loopback_flags=False, launcher=NO_IPV6) as server:
        assert answers("127.0.0.1", server.http_port, "/healthz")
        assert answers("127.0.0.1", server.metrics_port, "/metrics")
        assert grpc_serving("127.0.0.1", server.grpc_port)
        if HAS_IPV6:  # the machine has it, the server's Python does not
            assert not answers("::1", server.http_port, "/healthz")
            assert not answers("::1", server.metrics_port, "/metrics")


@contextmanager
def _no_ipv6_sockets(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real = socket.socket

    def refusing(family: int = -1, *args: object, **kwargs: object) -> socket.socket:
        if family == socket.AF_INET6:
            raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
        return real(family, *args, **kwargs)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        patch.setattr(socket, "socket", refusing)
        yield


def test_the_hosts_listened_on_follow_grpc(monkeypatch):
    assert [is_wildcard(h) for h in ("0.0.0.0", "::", "0:0::0", "::1", "localhost")] == [
        True,
        True,
        True,
        False,
        False,
    ]
    for host in ("127.0.0.1", "::1", "localhost", "192.0.2.7"):
        assert listen_hosts(host) == (host,)
        assert not dual_stack(host)
    assert listen_hosts("::") == listen_hosts("0.0.0.0")
    assert listen_hosts("0.0.0.0") == (("0.0.0.0", "::") if HAS_IPV6 else ("0.0.0.0",))
    with _no_ipv6_sockets(monkeypatch):
        assert not ipv6_available()
        assert listen_hosts("::") == ("0.0.0.0",)
        assert not dual_stack("0.0.0.0")
    monkeypatch.setattr(socket, "has_ipv6", False)
    assert listen_hosts("0.0.0.0") == ("0.0.0.0",)


def test_without_ipv6_an_ipv6_address_with_no_ipv4_one_beside_it_is_kept(monkeypatch):
    """``::1`` alone is kept, to fail binding with the system's reason (``cannot
    listen``), rather than dropped to no address at all: the server then logged
    ``listening`` on nothing and ran."""
    with _no_ipv6_sockets(monkeypatch):
        assert resolved_addresses("::1", 0) == [(socket.AF_INET6, ("::1", 0, 0, 0))]
        assert [family for family, _ in resolved_addresses("localhost", 0)] == [socket.AF_INET]


def test_with_ipv6_switched_off_a_wildcard_host_is_served_on_ipv4_alone():
    """docs/operations.md, "Configuration": a machine that cannot bind IPv6 loopback, here
    one where ``disable_ipv6`` is set, serves a wildcard on IPv4 alone, as gRPC does. Such
    a kernel still makes IPv6 sockets and binds ``::``: only ``::1`` is gone."""
    done = _run_with_ipv6_switched_off(
        "from service.listen import listen_hosts; print(listen_hosts('0.0.0.0'))"
    )
    assert done.stdout == "('0.0.0.0',)\n", done.stderr


# Runs in the namespace: ``serve --host localhost`` on all three ports (the namespace's
# own, so fixed ones), its log until it listens or exits, then SIGTERM; with a port
# given as its first argument held by another socket first, on 127.0.0.1 or the address
# given as its second.
_SERVE_LOCALHOST = """
import socket, subprocess, sys
if sys.argv[1:]:
    address = (sys.argv[2] if sys.argv[2:] else "127.0.0.1", int(sys.argv[1]))
    held = socket.create_server(address, family=socket.getaddrinfo(*address)[0][0])
command = [sys.executable, "-m", "service", "serve", "--host", "localhost"]
ports = ["--grpc-port", "50051", "--http-port", "8080", "--metrics-port", "9464"]
serving = subprocess.Popen(command + ports, stdout=subprocess.PIPE, text=True)
for line in serving.stdout:
    print(line, end="")
    if '"listening"' in line:
        serving.terminate()
print(serving.wait(60))
"""


def test_with_ipv6_switched_off_localhost_is_served_on_ipv4():
    """On a machine that cannot bind ``::1`` whose /etc/hosts names it ``localhost`` too
    (Debian's and Docker's do), ``--host localhost`` is served on 127.0.0.1, as gRPC
    serves it: the port check and the HTTP and metrics ports refused to start over
    ``::1`` (a review; the check's exception for gRPC's own ``::1`` alone was not enough)."""
    done = _run_with_ipv6_switched_off(_SERVE_LOCALHOST, server_environment())
    *lines, status = done.stdout.splitlines()
    logged = events("\n".join(lines))
    listening = next((line for line in logged if line["event"] == "listening"), None)
    assert listening is not None, done.stdout
    assert (listening["grpc"], listening["http"]) == ("localhost:50051", "localhost:8080")
    assert [line["address"] for line in logged if line["event"] == "metrics"] == ["localhost:9464"]
    assert status == "0", done.stdout


def test_with_ipv6_switched_off_a_port_taken_on_localhost_is_blamed_on_the_port():
    """Where ``localhost`` is served on 127.0.0.1 alone (above), a port another process
    holds there is the port's fault, not the host's: ``host_at_fault`` tried ``::1`` too
    and named ``--host`` (a review)."""
    done = _run_with_ipv6_switched_off(_SERVE_LOCALHOST, server_environment(), "8080")
    *lines, status = done.stdout.splitlines()
    [failure] = [line for line in events("\n".join(lines)) if line["event"] == "cannot listen"]
    assert (failure["listener"], failure["setting"]) == (
        "http",
        "--http-port or CARDRULES_HTTP_PORT",
    )
    assert status == "1", done.stdout


# Runs in the namespace: ``serve --host HOST`` with the ports its JSON argument gives
# (0 for any), with the addresses and ports it names held first by other sockets, and
# the range of ports the kernel gives port 0 set where it says; then the server's log, which of the namespace's loopback addresses answered on
# each port it listened on (a JSON line) and its exit status.
_SERVE_AND_PROBE = """
import json, socket, subprocess, sys
given = json.loads(sys.argv[1])
def port_range(text):
    with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
        default = ports.read()
    with open("/proc/sys/net/ipv4/ip_local_port_range", "w") as ports:
        ports.write(text)
    return default
default_range = port_range(given["port_range"]) if given["port_range"] else None
held = [
    socket.create_server(tuple(address), family=socket.getaddrinfo(*address)[0][0])
    for address in given["held"]
]
command = [sys.executable, "-m", "service", "serve", "--host", given["host"]]
flags = [text for name, port in given["ports"].items() for text in (f"--{name}-port", str(port))]
serving = subprocess.Popen(command + flags, stdout=subprocess.PIPE, text=True)
ports = {}
for line in serving.stdout:
    print(line, end="")
    event = json.loads(line)
    if event["event"] == "metrics":
        ports["metrics"] = int(event["address"].rsplit(":", 1)[1])
    if event["event"] == "listening":
        ports.update(grpc=event["grpc_port"], http=event["http_port"])
        break
if default_range:  # the probes' own connections need ports of the range
    port_range(default_range)
def answers(address, port):
    try:
        socket.create_connection((address, port), timeout=10).close()
    except OSError:  # refused, or no IPv6 on this kernel
        return False
    return True
addresses = ("127.0.0.1", "127.0.0.2", "::1")
answering = {name: [a for a in addresses if answers(a, port)] for name, port in ports.items()}
serving.terminate()
print(serving.stdout.read(), end="")
print(json.dumps(answering))
print(serving.wait(60))
"""

#: Whether the namespaces the tests make have IPv6 (a kernel built without it has no
#: such folder); this machine's own setting does not carry over to a new namespace.
NAMESPACE_IPV6 = os.path.isdir("/proc/sys/net/ipv6")
LOOPBACKS = ["127.0.0.1", "::1"] if NAMESPACE_IPV6 else ["127.0.0.1"]
FIXED = {"grpc": 50051, "http": 8080, "metrics": 9464}


def _serve_and_probe(
    hosts: str,
    host: str = "localhost",
    ports: dict[str, int] = FIXED,
    held: list[tuple[str, int]] = [],  # noqa: B006 (never changed)
    port_range: str | None = None,
) -> tuple[list[dict[str, object]], dict[str, list[str]], str]:
    """``_SERVE_AND_PROBE`` in a namespace with ``hosts`` for /etc/hosts, the ``held``
    addresses and ports held by other sockets and ``port_range`` as the kernel's range
    for port 0: the server's log lines, which addresses answered on each port, and its
    exit status."""
    given = json.dumps({"host": host, "ports": ports, "held": held, "port_range": port_range})
    done = _run_in_namespace(_SERVE_AND_PROBE, given, hosts=hosts, env=server_environment())
    assert done.stderr == "", done.stderr  # no line of grpc's own, however it ends
    *lines, answering, status = done.stdout.splitlines()
    return events("\n".join(lines)), json.loads(answering), status


@pytest.mark.parametrize("grpc_port", [50051, 0])
@pytest.mark.parametrize(
    ("hosts", "host"),
    [
        ("127.0.0.1 localhost myhost\n127.0.0.2 myhost\n", "localhost"),
        ("127.0.0.1 localhost\n::1 localhost\n", "localhost"),
        ("::1 localhost\n", "localhost"),
        ("127.0.0.1 localhost\n", "LocalHost"),
        ("127.0.0.1 localhost dev.localhost\n", "dev.localhost"),
        ("127.0.0.1 localhost\n", "dev.localhost"),
    ],
)
def test_grpc_listens_on_the_addresses_http_and_metrics_do(hosts, host, grpc_port):
    """gRPC is given the numeric addresses ``--host`` is served on (``service.listen``),
    all on one port, with port 0 too: given the name, grpc's own resolver merged every
    /etc/hosts line sharing one of its names, so with ``127.0.0.1 localhost myhost``
    and ``127.0.0.2 myhost`` (a LAN address in real life), ``--host localhost`` had
    gRPC alone listen on 127.0.0.2 too (a review). A loopback name of RFC 6761
    (``localhost``, ``*.localhost``, in any case) is served on both loopbacks, as gRPC's
    clients resolve it, whatever /etc/hosts gives it, and where it gives nothing. The
    ``listening`` and ``metrics`` lines name the addresses that answer."""
    ports = {**FIXED, "grpc": grpc_port}
    logged, answering, status = _serve_and_probe(hosts, host=host, ports=ports)
    assert answering == {"grpc": LOOPBACKS, "http": LOOPBACKS, "metrics": LOOPBACKS}, logged
    for event in ("listening", "metrics"):
        [line] = [line for line in logged if line["event"] == event]
        addresses = line["addresses"]
        assert isinstance(addresses, list) and sorted(addresses) == LOOPBACKS, line
    assert status == "0", logged


@pytest.mark.parametrize("listener", ["grpc", "http"])
def test_port_0_is_one_port_free_on_every_address(listener):
    """Port 0 over several addresses is one port free on each (``listen.one_port``): the
    port the first address got was given the rest, where it could be taken, and the
    server failed in gRPC's words with a line of gRPC's own on stderr (a review). With
    the kernel's range at 41530 to 41533 and its odd ports held on 127.0.0.1, the server
    listens on an even one on both loopbacks: Linux gives ``::1`` an odd port first, so
    the first tries fail and are held while the next is asked for (a review). With the
    range cut to two ports, one held on each loopback, the server refuses in words of
    its own, naming the addresses."""
    hosts = "::1 localhost\n127.0.0.1 localhost\n"
    ports = {**FIXED, listener: 0}
    odd = [("127.0.0.1", 41531), ("127.0.0.1", 41533)]
    logged, answering, status = _serve_and_probe(
        hosts, ports=ports, held=odd, port_range="41530 41533"
    )
    assert answering == {"grpc": LOOPBACKS, "http": LOOPBACKS, "metrics": LOOPBACKS}, logged
    [listening] = [line for line in logged if line["event"] == "listening"]
    assert listening[f"{listener}_port"] in (41530, 41532) and status == "0", logged
    held = [("127.0.0.1", 41530), ("::1", 41531)] if NAMESPACE_IPV6 else [("127.0.0.1", 41530)]
    logged, _, status = _serve_and_probe(hosts, ports=ports, held=held, port_range="41530 41531")
    if not NAMESPACE_IPV6:  # 127.0.0.1 alone: 41531 is free there
        assert status == "0", logged
        return
    [failure] = [line for line in logged if line["event"] == "cannot listen"]
    assert (failure["listener"], failure["address"]) == (listener, "localhost:0")
    assert failure["error"] == "[Errno 98] no port was found free on all of ::1, 127.0.0.1"
    assert status == "1", logged


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_port_0_on_a_wildcard_is_one_port_free_on_both_families(host):
    """The HTTP gateway binds a wildcard's two families one site each (``service.listen``),
    so its port 0 too is one free on both: 0.0.0.0 took a port another process held on
    ``[::]`` alone, and the server failed to bind ``[::]`` (a review). gRPC and metrics
    serve a wildcard on one dual-stack socket. Without IPv6, 0.0.0.0 alone is served."""
    held = [("::", 41531), ("::", 41533)] if NAMESPACE_IPV6 else []
    ports = {**FIXED, "http": 0}
    logged, answering, status = _serve_and_probe(
        "", host=host, ports=ports, held=held, port_range="41530 41533"
    )
    every = ["127.0.0.1", "127.0.0.2", *LOOPBACKS[1:]]  # all of 127.0.0.0/8 is loopback
    assert answering == {"grpc": every, "http": every, "metrics": every}, logged
    [listening] = [line for line in logged if line["event"] == "listening"]
    assert listening["http_port"] in (41530, 41532) and status == "0", logged


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_wildcards_grpc_port_0_is_reported_as_the_port_bound(host):
    """The ``listening`` line names the port gRPC took for a wildcard's port 0, where
    it serves, not 0: the other wildcard tests all give fixed gRPC ports."""
    args = ("--host", host, "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0")
    with running(args, loopback_flags=False) as server:
        assert server.grpc_port != 0
        assert grpc_serving("127.0.0.1", server.grpc_port)
        if HAS_IPV6:
            assert grpc_serving("::1", server.grpc_port)


def test_a_name_that_only_ends_in_localhost_is_served_as_resolved():
    """Only ``localhost`` and names under it are loopback names (RFC 6761):
    ``notlocalhost`` is served on what /etc/hosts gives it alone."""
    hosts = "127.0.0.1 localhost notlocalhost\n"
    logged, answering, status = _serve_and_probe(hosts, host="notlocalhost")
    assert answering == {"grpc": ["127.0.0.1"], "http": ["127.0.0.1"], "metrics": ["127.0.0.1"]}
    assert status == "0", logged


@pytest.mark.parametrize(
    ("hosts", "host", "held", "listener"),
    [
        ("127.0.0.1 localhost\n", "localhost", "::1", "grpc"),
        ("127.0.0.1 localhost\n", "localhost", "::1", "http"),
        ("127.0.0.1 localhost\n", "localhost", "::1", "metrics"),
        ("127.0.0.1 localhost\n::1 localhost\n", "localhost", "127.0.0.1", "grpc"),
        ("::1 localhost\n127.0.0.1 localhost\n", "localhost", "127.0.0.1", "http"),
        ("::1 localhost\n", "localhost", "127.0.0.1", "grpc"),
        ("127.0.0.1 localhost\n", "LocalHost", "::1", "grpc"),
        ("127.0.0.1 localhost\n", "localhost.", "::1", "grpc"),
        ("127.0.0.1 localhost dev.localhost\n", "dev.localhost", "::1", "grpc"),
    ],
)
def test_a_port_held_on_any_address_of_localhost_stops_the_server(hosts, host, held, listener):
    """``localhost`` is served on each loopback, so each must be free on every port:
    another process on ``[::1]:50051`` would take the gRPC clients, which resolve the
    name to ``::1`` first even where /etc/hosts does not (a review found the server
    started beside one, its clients answered by the other). The refusal names the
    address, which the ``--host`` name alone does not tell; on a kernel without IPv6,
    ``localhost`` is served on 127.0.0.1 alone and nothing can hold ``::1``."""
    ports = {**FIXED, "grpc": FIXED[listener], listener: FIXED["grpc"]}
    if held == "::1" and not NAMESPACE_IPV6:
        logged, answering, status = _serve_and_probe(hosts, host=host, ports=ports)
        assert answering[listener] == ["127.0.0.1"] and status == "0", logged
        return
    logged, _, status = _serve_and_probe(hosts, host=host, ports=ports, held=[(held, 50051)])
    [failure] = [line for line in logged if line["event"] == "cannot listen"]
    assert (failure["listener"], failure["address"]) == (listener, f"{host}:50051")
    assert failure["setting"] == f"--{listener}-port or CARDRULES_{listener.upper()}_PORT"
    address = f"[{held}]" if ":" in held else held
    assert str(failure["error"]).startswith(f"{address}:50051, which {host} is served on: ")
    assert "in use" in str(failure["error"])
    assert status == "1", logged


def test_an_address_in_another_spelling_is_refused_in_the_systems_words():
    """A port taken on ``--host 0:0:0:0:0:0:0:1`` is not said to be one of its addresses:
    it is ``::1`` spelled out (a review found "[::1]:50051, which 0:0:0:0:0:0:0:1 resolves
    to"). Without IPv6, nothing holds the port and the address cannot be bound."""
    held = [("::1", 50051)] if NAMESPACE_IPV6 else []
    logged, _, status = _serve_and_probe("", host="0:0:0:0:0:0:0:1", held=held)
    [failure] = [line for line in logged if line["event"] == "cannot listen"]
    assert failure["address"] == "[0:0:0:0:0:0:0:1]:50051"
    assert "served on" not in str(failure["error"])
    assert ("in use" in str(failure["error"])) == NAMESPACE_IPV6
    assert status == "1", logged


def _run_with_ipv6_switched_off(
    code: str, env: dict[str, str] | None = None, *arguments: str
) -> subprocess.CompletedProcess[str]:
    """Python ``code`` run in a network namespace of its own with ``disable_ipv6`` set and
    the /etc/hosts of most systems, which names ``::1`` ``localhost`` too."""
    hosts = "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"
    return _run_in_namespace(code, *arguments, hosts=hosts, env=env, ipv6=False)


def _run_in_namespace(
    code: str, *arguments: str, hosts: str, env: dict[str, str] | None, ipv6: bool = True
) -> subprocess.CompletedProcess[str]:
    """Python ``code`` run in a network namespace of its own, its loopback up (and without
    IPv6 unless ``ipv6``; unprivileged, a user namespace maps the caller to root), with
    ``hosts`` for /etc/hosts (a mount namespace's own)."""
    switch_off = "for f in all lo; do echo 1 > /proc/sys/net/ipv6/conf/$f/disable_ipv6; done"
    ipv6_off = "" if ipv6 else f" && {{ [ ! -d /proc/sys/net/ipv6 ] || {{ {switch_off}; }}; }}"
    script = (
        f'printf \'{hosts}\' > "$HOSTS" && mount --bind "$HOSTS" /etc/hosts'
        f' && ip link set lo up{ipv6_off} && exec "$@"'
    )
    user = () if os.geteuid() == 0 else ("--map-root-user",)
    # A pid namespace too, whose processes all die with its first: a server the code
    # started is not left running when the run times out.
    pid = ("--pid", "--fork", "--kill-child")
    namespace = ("unshare", "--net", "--mount", *pid, *user, "sh", "-c", script, "sh")
    with tempfile.TemporaryDirectory() as folder:
        return subprocess.run(
            [*namespace, sys.executable, "-c", code, *arguments],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            env={**(env or os.environ), "HOSTS": os.path.join(folder, "hosts")},
        )


def test_a_specific_host_is_served_on_that_address_alone():
    args = fixed_ports("127.0.0.1")
    with running(args, loopback_flags=False) as server:
        assert served_on(server) == [["127.0.0.1"]] * 2
        assert answers("127.0.0.1", server.http_port, "/healthz")
        assert answers("127.0.0.1", server.metrics_port, "/metrics")
        if HAS_IPV6:
            assert not answers("::1", server.http_port, "/healthz")
            assert not answers("::1", server.metrics_port, "/metrics")


def test_workers_share_the_http_port_on_ipv4_and_ipv6():
    """Every worker binds both families with SO_REUSEPORT, and the kernel spreads each
    family's connections over them: with 30 connections per family, all landing on
    one worker has a chance of 2 in a billion."""
    with running(fixed_ports(None, "--workers", "2"), loopback_flags=False) as server:
        server.wait_for_logs("listening", 2)
        addresses = ("127.0.0.1", "::1") if HAS_IPV6 else ("127.0.0.1",)
        for count, address in enumerate(addresses, 1):
            for _ in range(30):
                refused_call(server, address)
            lines = server.wait_for_logs("request", 30 * count)[30 * (count - 1) :]
            assert {line["worker"] for line in lines} == {1, 2}, address


@pytest.mark.parametrize("flag", ["--grpc-port", "--http-port", "--metrics-port"])
def test_a_port_held_on_ipv6_alone_stops_a_server_on_0_0_0_0(flag):
    """0.0.0.0 is served on [::] too, so another process there would take the port's
    IPv6 clients; grpc itself quietly served IPv4 alone then."""
    if not HAS_IPV6:  # no process can hold [::] here: the wildcard is served on IPv4 alone
        assert listen_hosts("0.0.0.0") == ("0.0.0.0",)
        return
    with port_taken("::") as port:
        done = serve_and_fail("--host", "0.0.0.0", "--http-port", "0", flag, str(port))
    failure = cannot_listen_line(done)
    assert failure["address"] == f"0.0.0.0:{port}"
    assert str(failure["error"]).startswith(f"[::]:{port}, which 0.0.0.0 is served on too: ")
    assert "in use" in str(failure["error"])
    assert "listening" not in done.stdout and done.stderr == ""


def test_a_name_with_an_address_of_another_machine_is_blamed_on_the_host() -> None:
    """A name /etc/hosts gives this machine's address and another's cannot be served on
    any port, since the server listens on every address of its host: ``cannot listen``
    names ``--host``, not the port, though the first address would bind (a mutation
    review: blaming the host only when no address binds passed every test)."""
    hosts = "127.0.0.1 localhost myhost\n192.0.2.5 myhost\n"
    logged, answering, status = _serve_and_probe(hosts, "myhost")
    [failure] = [line for line in logged if line["event"] == "cannot listen"]
    assert (failure["listener"], failure["setting"]) == ("grpc", "--host or CARDRULES_HOST")
    assert (answering, status) == ({}, "1")
