"""Which addresses a ``--host`` listens on, for gRPC, the HTTP gateway and the metrics
port (docs/operations.md, "Configuration").

grpc core serves a wildcard host (``0.0.0.0`` or ``::``) on IPv4 and IPv6 alike,
on a dual-stack ``[::]`` socket, whenever the machine can bind IPv6 loopback, and
on ``0.0.0.0`` alone when it cannot. asyncio and the standard library bind
``0.0.0.0`` to IPv4 alone (and asyncio ``::`` to IPv6 alone): on an IPv6 cluster a
pod went Ready on its gRPC probes with HTTP and ``/metrics`` out of reach. These
helpers make the other two ports serve a wildcard as gRPC does. Any other host is
served on every address it resolves to, all on one port (``start_http``,
``start_metrics_http``), but for its IPv6 addresses on a machine that cannot bind
IPv6 loopback while an IPv4 one is left: ``localhost`` resolves to ``::1`` too in
most /etc/hosts, also where ``disable_ipv6`` is set, and gRPC serves it on IPv4
alone there.

A loopback name (``localhost``, ``*.localhost``: RFC 6761) is served on both
loopbacks (where IPv6 loopback can be bound) beside what /etc/hosts gives it, if
anything: gRPC's clients (c-ares) resolve it to ``::1`` first whatever /etc/hosts
says, so another process on ``[::1]`` would answer them, and the port check must see
it. With port 0, all of a name's addresses get one port free on each (``one_port``).

gRPC is given those numeric addresses too, not the name: its own resolver (c-ares)
answers a name from every /etc/hosts line that shares one of its names, so with
``127.0.0.1 localhost myhost`` and ``192.0.2.5 myhost``, ``--host localhost`` had gRPC
listen on 192.0.2.5 as well, reachable from the network while HTTP and metrics stayed
on loopback.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import socket
from typing import Any

IPV4_WILDCARD = "0.0.0.0"
IPV6_WILDCARD = "::"


def is_wildcard(host: str) -> bool:
    """Whether ``host`` means every address of the machine (``0.0.0.0``, ``::``)."""
    address = _as_address(host)
    return address is not None and address.is_unspecified


def is_address(host: str) -> bool:
    """Whether ``host`` is a numeric address (an IPv6 one in any spelling, a zone kept),
    not a name."""
    return _as_address(host) is not None


def _as_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:  # a host name
        return None


def ipv6_available() -> bool:
    """Whether this machine can bind IPv6 loopback: grpc core's own test before it
    serves a wildcard on IPv6 too. False on a kernel without IPv6 (no socket) and
    where it is switched off (``disable_ipv6``: no ``::1``)."""
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


def dual_stack(host: str) -> bool:
    """Whether ``host`` is to be served on IPv4 and IPv6 alike."""
    return len(listen_hosts(host)) > 1


def listen_hosts(host: str) -> tuple[str, ...]:
    """The hosts to bind for ``host``, one socket each: both wildcards for a wildcard
    (IPv4's alone on a machine without IPv6), else ``host`` itself."""
    if not is_wildcard(host):
        return (host,)
    return (IPV4_WILDCARD, IPV6_WILDCARD) if ipv6_available() else (IPV4_WILDCARD,)


Address = tuple[socket.AddressFamily, tuple[Any, ...]]

#: How many ports ``one_port`` tries before it gives up.
_PORT_TRIES = 20


def is_localhost(host: str) -> bool:
    """Whether ``host`` is a loopback name of RFC 6761 (``localhost``, ``*.localhost``,
    in any case)."""
    name = host.lower().rstrip(".")
    return name == "localhost" or name.endswith(".localhost")


def resolved_addresses(host: str, port: int) -> list[Address]:
    """The (family, socket address) of a TCP listener on ``host`` (no wildcard) and
    ``port``: each address ``getaddrinfo`` gives once, in its order (a name listed twice
    in /etc/hosts resolves to one address twice, bound once), then for a loopback name
    (``is_localhost``) either loopback it lacks, whether or not the system resolves it;
    without the IPv6 ones where IPv6 cannot be bound and an IPv4 one is left (the
    module's docstring). With none left, they stay, to fail with the system's reason.
    OSError where the name does not resolve."""
    loopback = is_localhost(host)
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror:
        if not loopback:
            raise
        found = []
    addresses: list[Address] = [(family, address) for family, _, _, _, address in found]
    if loopback:
        addresses += [(socket.AF_INET, ("127.0.0.1", port)), (socket.AF_INET6, ("::1", port, 0, 0))]
    distinct = list(dict.fromkeys(addresses))
    ipv4 = [answer for answer in distinct if answer[0] != socket.AF_INET6]
    if ipv4 and len(ipv4) < len(distinct) and not ipv6_available():
        return ipv4
    return distinct


def listen_addresses(host: str, port: int) -> list[Address]:
    """What the HTTP gateway binds for ``host``, one socket each: a wildcard's
    (``listen_hosts``), else ``resolved_addresses``."""
    if not is_wildcard(host):
        return resolved_addresses(host, port)
    return [
        (socket.AF_INET6, (wildcard, port, 0, 0))
        if ":" in wildcard
        else (socket.AF_INET, (wildcard, port))
        for wildcard in listen_hosts(host)
    ]


def served_hosts(host: str, addresses: list[Address]) -> list[str]:
    """The numeric hosts a listener on ``host`` bound ``addresses`` for, as its log line
    names them: a wildcard's ``listen_hosts`` (one dual-stack socket may serve both),
    else each address's ``numeric_host``."""
    if is_wildcard(host):
        return list(listen_hosts(host))
    return [numeric_host(address) for _, address in addresses]


def numeric_host(address: tuple[Any, ...]) -> str:
    """The numeric host of a socket address, an IPv6 scope id kept (``fe80::1%eth0``)."""
    return socket.getnameinfo(address, socket.NI_NUMERICHOST | socket.NI_NUMERICSERV)[0]


def one_port(addresses: list[Address], port: int) -> int:
    """The port to listen on at every one of ``addresses``: ``port``, or for port 0 over
    several, one free on each of them, where the port the first got could be taken on
    another (a review met it). OSError when none is found. The probes are closed before
    the listeners bind: another process may still take the port in between."""
    if port or len(addresses) < 2:
        return port
    (family, first), *rest = addresses
    # Each port tried stays bound until one is found, so that the kernel gives another,
    # till its range runs out.
    with contextlib.ExitStack() as tried:
        for _ in range(_PORT_TRIES):
            probe = tried.enter_context(socket.socket(family, socket.SOCK_STREAM))
            if _bind_error(probe, family, on_port(first, 0), reuse=False):
                break
            chosen: int = probe.getsockname()[1]
            if all(
                bind_error(family, on_port(address, chosen)) is None for family, address in rest
            ):
                return chosen
    hosts = ", ".join(numeric_host(address) for _, address in addresses)
    raise OSError(errno.EADDRINUSE, f"no port was found free on all of {hosts}")


def on_port(address: tuple[Any, ...], port: int) -> tuple[Any, ...]:
    """``address`` on ``port``, an IPv6 one's flow info and scope id kept."""
    return (address[0], port, *address[2:])


def bind_error(family: socket.AddressFamily, address: tuple[Any, ...]) -> OSError | None:
    """What binding a TCP socket to ``address`` raises, or None."""
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            return _bind_error(probe, family, address)
    except OSError as error:  # no socket at all (no IPv6, no descriptors left)
        return error


def _bind_error(
    probe: socket.socket,
    family: socket.AddressFamily,
    address: tuple[Any, ...],
    *,
    reuse: bool = True,
) -> OSError | None:
    # As the listeners bind: an IPv6 socket for IPv6 alone (asyncio's, and ``[::]`` is
    # checked beside ``0.0.0.0``), and with ``reuse`` a port whose last connections linger
    # in TIME_WAIT is free, as grpc and aiohttp take it (two such sockets may share a
    # port while neither listens, so the ports ``one_port`` holds go without).
    try:
        if family == socket.AF_INET6:
            probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        if reuse:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(address)
    except OSError as error:
        return error
    return None
