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

``localhost`` is served on both loopbacks (where IPv6 loopback can be bound) even
where /etc/hosts gives it one: gRPC's clients (c-ares) resolve it to ``::1`` first
whatever /etc/hosts says (RFC 6761), so another process on ``[::1]`` would answer
them, and the port check must see it.

gRPC is given those numeric addresses too, not the name: its own resolver (c-ares)
answers a name from every /etc/hosts line that shares one of its names, so with
``127.0.0.1 localhost myhost`` and ``192.0.2.5 myhost``, ``--host localhost`` had gRPC
listen on 192.0.2.5 as well, reachable from the network while HTTP and metrics stayed
on loopback.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

IPV4_WILDCARD = "0.0.0.0"
IPV6_WILDCARD = "::"


def is_wildcard(host: str) -> bool:
    """Whether ``host`` means every address of the machine (``0.0.0.0``, ``::``)."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:  # a host name
        return False


def is_address(host: str) -> bool:
    """Whether ``host`` is a numeric address (an IPv6 one in any spelling, a zone kept),
    not a name."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


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


def addresses_to_bind(
    host: str, found: Iterable[tuple[Any, ...]]
) -> list[tuple[socket.AddressFamily, tuple[Any, ...]]]:
    """The (family, socket address) of each answer of ``getaddrinfo`` for ``host`` once, in
    its order (a name listed twice in /etc/hosts resolves to one address twice, bound
    once), then for ``localhost`` either loopback it lacks, without the IPv6 ones where
    IPv6 cannot be bound and an IPv4 one is left (the module's docstring); with none
    left, they stay, to fail with the system's reason."""
    distinct = list(dict.fromkeys((family, address) for family, _, _, _, address in found))
    if host.lower() == "localhost" and distinct:
        port = distinct[0][1][1]
        loopbacks = [(socket.AF_INET, ("127.0.0.1", port)), (socket.AF_INET6, ("::1", port, 0, 0))]
        distinct += [loopback for loopback in loopbacks if loopback not in distinct]
    ipv4 = [answer for answer in distinct if answer[0] != socket.AF_INET6]
    if ipv4 and len(ipv4) < len(distinct) and not ipv6_available():
        return ipv4
    return distinct


def numeric_host(address: tuple[Any, ...]) -> str:
    """The numeric host of a socket address, an IPv6 scope id kept (``fe80::1%eth0``)."""
    return socket.getnameinfo(address, socket.NI_NUMERICHOST | socket.NI_NUMERICSERV)[0]


def grpc_hosts(host: str) -> list[str]:
    """The hosts gRPC is told to listen on for ``host``, all on one port: a wildcard as
    given (gRPC core serves it on both families itself), else each numeric address of
    ``resolved_addresses`` (the module's docstring). OSError where the name does not
    resolve."""
    if is_wildcard(host):
        return [host]
    return [numeric_host(address) for _, address in resolved_addresses(host, 0)]


def resolved_addresses(host: str, port: int) -> list[tuple[socket.AddressFamily, tuple[Any, ...]]]:
    """``addresses_to_bind`` of a TCP listener on ``host`` and ``port``: OSError where the
    name does not resolve."""
    return addresses_to_bind(
        host, socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    )
