"""Client keepalive pings (docs/operations.md, "Keepalive"): the server's grpc options let
a client ping an idle connection without being cut off (GOAWAY too_many_pings).

A real grpc server on loopback with the options ``cardrules serve`` uses, and a real
client channel that pings without calls. grpc core's client pings at most once a second,
and its server cuts a client off at the third ping too soon (two strikes allowed): on
grpc's defaults that happens within about 4 s of an idle connection.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from service.config import ServerConfig, add_server_arguments, resolve
from service.server import MIN_PING_INTERVAL_MS, grpc_server_options
from tests.service.grpc_helpers import health as health_stub

#: Long enough for the fourth ping of a client pinging every second, which grpc's default
#: policy answers with GOAWAY (about 4 s after the last call).
IDLE_SECONDS = 5.0

#: A client that pings every second (grpc core's least) with no call open, without the
#: limit of two pings between data frames that grpc core's client sets itself.
PINGING_CLIENT = [
    ("grpc.keepalive_time_ms", 1000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.use_local_subchannel_pool", 1),
]


def embedded_defaults() -> ServerConfig:
    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    return resolve(parser.parse_args(["--host", "127.0.0.1"]), environ={})


class PeerHealth(health.HealthServicer):
    """The health service, noting the client address (its connection) of each Check."""

    def __init__(self) -> None:
        super().__init__()
        self.peers: list[str] = []

    def Check(  # noqa: N802 - the name is the RPC's
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        self.peers.append(context.peer())
        return super().Check(request, context)


@contextmanager
def serving(options: list[tuple[str, int]]) -> Iterator[tuple[str, PeerHealth]]:
    """A grpc server on a free loopback port with ``options``: its target and health."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=options)
    servicer = PeerHealth()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        server.stop(None)


def idle_states(channel: grpc.Channel, seconds: float) -> list[grpc.ChannelConnectivity]:
    """The states ``channel`` went through in ``seconds`` left idle, or until it left
    READY (the server cut the connection)."""
    states: list[grpc.ChannelConnectivity] = []
    left_ready = threading.Event()

    def note(state: grpc.ChannelConnectivity) -> None:
        states.append(state)
        if state != grpc.ChannelConnectivity.READY:
            left_ready.set()

    channel.subscribe(note)
    try:
        left_ready.wait(seconds)
    finally:
        channel.unsubscribe(note)
    return states


def test_a_client_pinging_without_calls_keeps_its_connection() -> None:
    """A client pinging an idle connection more often than grpc's server allows by default
    (once in 2 hours without calls) keeps it: no GOAWAY, no new connection."""
    options = grpc_server_options(embedded_defaults(), min_ping_interval_ms=500)
    with (
        serving(options) as (target, servicer),
        grpc.insecure_channel(target, options=PINGING_CLIENT) as channel,
    ):
        check = health_stub(channel).Check
        check(health_pb2.HealthCheckRequest(), timeout=5)
        states = idle_states(channel, IDLE_SECONDS)
        check(health_pb2.HealthCheckRequest(), timeout=5)
    assert set(states) == {grpc.ChannelConnectivity.READY}, f"the connection was cut: {states}"
    first, second = servicer.peers
    assert second == first, "the client had to reconnect"


def test_the_server_allows_a_ping_every_5_seconds_also_without_calls() -> None:
    """What docs/operations.md ("Keepalive") promises clients; grpc's own default is one
    ping in 5 minutes with calls and in 2 hours without."""
    options = dict(grpc_server_options(embedded_defaults()))
    assert MIN_PING_INTERVAL_MS == 5_000
    assert options["grpc.http2.min_ping_interval_without_data_ms"] == 5_000
    assert options["grpc.keepalive_permit_without_calls"] == 1
    # grpc's default of two strikes stays: a client far too eager is still cut off.
    assert "grpc.http2.max_ping_strikes" not in options
