"""One server process: gRPC with health and reflection, the HTTP/JSON gateway,
metrics, draining (design section 6).

gRPC and HTTP share one asyncio loop, one API object and one ``CallRunner`` per
process. ``serve`` runs them in this process, or with ``--workers N`` hands over to
``service.supervisor``, which forks N workers before any server starts; each runs
``run_servers`` as a single process does, binding the same ports (gRPC and HTTP) with
SO_REUSEPORT so that the kernel spreads connections, beats for the supervisor's
watchdog and stops when the supervisor dies (a lifeline pipe, ``SupervisorLink``).
The multiprocess directory must be chosen before ``prometheus_client`` is first
imported, which is why ``service.serve_command`` imports this module only after
setting it.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2
from grpc_reflection.v1alpha import reflection
from prometheus_client import CollectorRegistry

from service.calls import CallRunner
from service.config import (
    ServerConfig,
    host_port,
    key_warnings,
    meant_variables,
    unknown_variables,
)
from service.early_cancels import quiet_early_cancels
from service.grpc_service import KrypkasinoServicer
from service.http_cors import CorsPolicy
from service.http_gateway import HttpGateway, HttpServer, start_http
from service.krypkasino_api import GAME, METHODS, SERVICE_NAME, KrypkasinoApi
from service.listen import (
    is_wildcard,
    numeric_host,
    one_port,
    resolved_addresses,
    served_hosts,
)
from service.logs import DROPPED_LINES, configure_logging, get_logger, status_or_crash
from service.metrics import (
    EPHEMERAL,
    PLAIN,
    SEALED,
    ServiceMetrics,
    add_keys_metric,
    add_process_metrics,
    add_sealing_metric,
    clear_multiprocess_dir,
    multiprocess_enabled,
    reserve_value_files,
)
from service.metrics_http import start_metrics_http
from service.open_files import AcceptErrorsOncePerWindow, raise_open_files_limit
from service.openapi import SERVICES, served_document
from service.ports import cannot_listen, ports_free
from service.signals import StopSignals, signals_blocked
from service.standard_services import (
    DrainingReflection,
    add_health_and_reflection,
    until_stopped,
)
from service.start_signals import STOP_SIGNALS, PendingSignals
from service.state_fields import state_fields
from service.tokens import KeyRing, SeatTokens, StateSealer
from service.watchdog import keep_beating

HEALTH_SERVICES = ("", "liveness", "readiness", SERVICE_NAME)
"""Health service names the server answers; probes ask for ``liveness`` and ``readiness``."""
DRAINED_ON_SHUTDOWN = ("", "readiness", SERVICE_NAME)
"""Names that turn NOT_SERVING on SIGTERM; ``liveness`` stays up while draining."""
SCHEMA_VERSION = 1

_log = get_logger("cardrules.server")


def load_keys(config: ServerConfig) -> KeyRing:
    """The configured key ring, or an ephemeral key (the caller warns) when none is set."""
    if config.state_keys:
        return KeyRing.parse(config.state_keys)
    return KeyRing.ephemeral()


def build_api(config: ServerConfig, keys: KeyRing, metrics: ServiceMetrics | None) -> KrypkasinoApi:
    """The API that both transports serve, sealing with ``keys`` (plain if configured)."""
    return KrypkasinoApi(
        build_sealer(keys, plain=config.plain_state),
        SeatTokens(keys),
        metrics,
        refuse_chosen_deals=config.refuse_chosen_deals,
    )


def build_sealer(keys: KeyRing, *, plain: bool) -> StateSealer:
    """The sealer of Krypkasino's state tokens under ``keys``; ``plain``: it writes plain
    tokens and reads them (``--plain-state``), as ``cardrules open-token`` reads them."""
    return StateSealer(keys, game=GAME, schema_version=SCHEMA_VERSION, plain=plain)


def new_metrics(registry: CollectorRegistry) -> ServiceMetrics:
    """The service's metrics in ``registry``, with a series per RPC pre-created."""
    return ServiceMetrics(registry, {SERVICE_NAME: METHODS})


# Calls open at once on one connection. grpc core sets no limit, and a call whose
# request never comes holds about 20 KB until its client gives up, one that sends part
# of its request and stalls about 80 KB (a flow-control window of it): one connection
# could hold tens of thousands. A gRPC client holds a call over the limit until one ends,
# but that is no queue to lean on: grpc's server counts a call for a moment after its
# answer has gone, so a client near or over the limit has some calls refused
# (UNAVAILABLE, REFUSED_STREAM, before the service sees them; no metric counts them)
# instead: at a limit of 100, one in 50 calls with 90 in flight, a third with 150; at
# 500 (grpcio's client, retries off), 4 of 9,000 with 450, 1,926 of 12,000 with 600,
# 5,891 of 20,000 with 1,000. Its retries are what shows (docs/operations.md, "Scaling
# and load balancing"). A connection full of stalled calls holds about 10 MB, of
# half-sent ones about 40 MB (docs/operations.md, "Sizing": the ingress must bound
# connections).
MAX_CONCURRENT_STREAMS = 500
# What the calls open at a connection's age limit get to finish. Unary calls take
# milliseconds; a call whose request never came would otherwise keep the connection.
CONNECTION_AGE_GRACE_MS = 30_000
# The shortest time between a client's keepalive pings that the server accepts while it
# sends the client nothing, also with no call open (docs/operations.md, "Keepalive").
# grpc core's server allows one every 5 minutes with calls open and every 2 hours without,
# and answers the third ping that comes sooner with GOAWAY too_many_pings: a client
# pinging every 10 s (grpc-js's common keepalive_time_ms 10000 with permit_without_calls)
# was cut off after about 30 s idle. Half of 10 s, so that a client timer that fires a
# little early never counts against it; a ping every 5 s per connection costs nothing.
MIN_PING_INTERVAL_MS = 5_000


def transport_limit(max_request_bytes: int) -> int:
    """grpc's own bound on a received message, decompressed: 5/4 of ``max_request_bytes``
    (80 KiB for the default 64 KiB), rounded down (docs/api.md, "Errors").

    Up to it the servicer refuses a request over the limit itself (REQUEST_TOO_LARGE,
    with its ErrorInfo); over it grpc refuses it, without. grpc checks a compressed
    message's size only once it has inflated it whole, so about 120 bytes of gzip make
    the server hold the bound for a moment. At four times the limit (256 KiB), 450 such
    calls on one connection took a server from 72 to 208-229 MiB, two connections to
    345 MiB, past a 256 MiB pod; at 5/4, 122-129 MiB: a connection of compressed calls
    holds about what one of half-sent uncompressed calls does (an 80 KB flow-control
    window each), the 40 MB of docs/operations.md, "Sizing"."""
    return max_request_bytes * 5 // 4


def grpc_server_options(
    config: ServerConfig, *, min_ping_interval_ms: int = MIN_PING_INTERVAL_MS
) -> list[tuple[str, int]]:
    """The grpc core options of ``config``: request limit, streams per connection, port
    sharing, connection age and idle time, and the client keepalive pings allowed (one per
    ``min_ping_interval_ms`` or slower, also without calls)."""
    options = [
        # A ping without a call open counts against the client unless this is set.
        ("grpc.keepalive_permit_without_calls", 1),
        # grpc core's name for GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS.
        ("grpc.http2.min_ping_interval_without_data_ms", min_ping_interval_ms),
        # grpc refuses a larger message itself, with no ErrorInfo; up to this bound the
        # servicer refuses requests over the limit (REQUEST_TOO_LARGE), and the bound
        # keeps what one call, compressed or not, can make the server buffer small.
        ("grpc.max_receive_message_length", transport_limit(config.max_request_bytes)),
        ("grpc.max_concurrent_streams", MAX_CONCURRENT_STREAMS),
        ("grpc.so_reuseport", 1 if config.workers > 1 else 0),
    ]
    if config.max_connection_age_seconds:
        # grpc adds +-10% jitter, so the clients of one server do not all reconnect at once.
        age_ms = round(config.max_connection_age_seconds * 1000)
        options.append(("grpc.max_connection_age_ms", age_ms))
        options.append(("grpc.max_connection_age_grace_ms", CONNECTION_AGE_GRACE_MS))
    if config.max_connection_idle_seconds:
        # Without it grpc keeps a connection that opens no call for ever, a file
        # descriptor and about 15 KB each (docs/operations.md, "Keepalive"). Its GOAWAY
        # comes only with no call open; the client reconnects at its next call.
        idle_ms = round(config.max_connection_idle_seconds * 1000)
        options.append(("grpc.max_connection_idle_ms", idle_ms))
    return options


async def run_servers(
    config: ServerConfig,
    keys: KeyRing,
    metrics: ServiceMetrics | None,
    pending: PendingSignals,
    supervisor: SupervisorLink | None = None,
) -> int:
    """Run the gRPC server and the HTTP gateway until a stop signal, then drain both.

    A signal ``pending`` recorded during start-up stops the server as soon as it
    serves. A worker also stops when its ``supervisor`` is gone, and beats for it
    (``_follow_supervisor``). Returns the exit status.

    An exception that escapes ends at once what had started before it goes on to the
    crash line (``status_or_crash``, ``_Started.end_at_once``).
    """
    started = _Started()
    try:
        return await _run_servers(config, keys, metrics, pending, supervisor, started)
    except BaseException:
        await started.end_at_once()
        raise


@dataclass(slots=True)
class _Started:
    """What ``_run_servers`` has started so far, for ``end_at_once``."""

    signals: StopSignals | None = None
    grpc: grpc.aio.Server | None = None
    http: HttpServer | None = None

    async def end_at_once(self) -> None:
        """Stop both servers, cancelling the calls in flight (no drain for a crashing
        process), and ignore stop signals from now on, as a clean stop does.

        A gRPC server still running once ``asyncio.run`` had closed the loop was shut
        down by grpc's ``Server.__del__``, which failed on the closed loop and printed
        its traceback on stderr, after the JSON line. And the closed loop restored the
        stop signals' default actions: a worker whose sibling crashed too was killed by
        the SIGTERM the supervisor then forwards (exit -15), before its crash line.
        """
        if self.grpc is not None:
            await self.grpc.stop(None)
        if self.http is not None:
            await self.http.runner.cleanup()
        if self.signals is not None:
            self.signals.finished()


async def _run_servers(
    config: ServerConfig,
    keys: KeyRing,
    metrics: ServiceMetrics | None,
    pending: PendingSignals,
    supervisor: SupervisorLink | None,
    started: _Started,
) -> int:
    # Until every server has started, so that each thread grpc and aiohttp start keeps
    # them blocked: the main thread takes every stop signal (``StopSignals.finished``).
    with signals_blocked(STOP_SIGNALS):
        signals = started.signals = StopSignals(asyncio.get_running_loop(), pending)
        asyncio.get_running_loop().set_exception_handler(AcceptErrorsOncePerWindow())
        quiet_early_cancels()
        if metrics is not None:
            DROPPED_LINES.count_in(metrics.log_lines_dropped)
        if supervisor is not None:
            _follow_supervisor(signals, supervisor)
        server = grpc.aio.server(options=grpc_server_options(config))
        api = build_api(config, keys, metrics)
        runner = CallRunner(metrics, keys.seat_token_pattern())
        server.add_generic_rpc_handlers(
            (KrypkasinoServicer(api, runner, config.max_request_bytes).rpc_handler(),)
        )
        health_servicer = DrainingHealth()
        reflection_servicer = DrainingReflection(
            (
                SERVICE_NAME,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            )
        )
        add_health_and_reflection(server, health_servicer, reflection_servicer)
        try:
            port, addresses = _add_grpc_ports(server, config.host, config.grpc_port)
        except (RuntimeError, OSError) as error:
            cannot_listen("grpc", config.host, config.grpc_port, str(error))
            return 1
        http = started.http = await _start_gateway(config, api, runner, metrics)
        if http is None:
            return 1
        started.grpc = server
        await server.start()
        for name in HEALTH_SERVICES:
            await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
        _log.info(
            "listening",
            grpc=host_port(config.host, port),
            grpc_port=port,
            http=host_port(config.host, http.port),
            http_port=http.port,
            # What the host was resolved to: gRPC and HTTP serve these, and only these.
            addresses=addresses,
            # Which pages may call: what to compare when a browser says "blocked by CORS".
            cors_origins=list(config.cors_origins),
            # Which state tokens this pod writes: in a mixed fleet, a pod whose
            # fingerprint differs may refuse them (service/state_fields.py).
            state_fields=state_fields(),
            # Whether a NewGame may choose its cards: an auditor reading the request
            # lines' deal_source knows which games could have (docs/operations.md).
            refuse_chosen_deals=config.refuse_chosen_deals,
            # Every key this pod opens with, the sealing one first: pods on NEW,OLD and
            # on NEW alone seal alike, and only this tells them apart (ids, no secret).
            key_ids=keys.hex_ids(),
            pid=os.getpid(),
        )
    await signals.received.wait()
    expired = await _shut_down(
        config, server, http, (health_servicer, reflection_servicer), signals
    )
    signals.finished()
    _log.info("stopped", grace_expired=expired, pid=os.getpid())
    return 0


def _add_grpc_ports(server: grpc.aio.Server, host: str, port: int) -> tuple[int, list[str]]:
    """Have ``server`` listen on ``host``, all on one port (``listen.one_port``); the port
    and the numeric hosts served (``listen.served_hosts``). A wildcard as given (gRPC
    core serves it on both families itself), a name on the numeric addresses the HTTP
    and metrics ports are served on (``service.listen``)."""
    if is_wildcard(host):
        return server.add_insecure_port(host_port(host, port)), served_hosts(host, [])
    addresses = resolved_addresses(host, port)
    port = one_port(addresses, port)
    for _, address in addresses:
        port = server.add_insecure_port(host_port(numeric_host(address), port))
    return port, served_hosts(host, addresses)


class DrainingHealth(health.aio.HealthServicer):
    """The standard health service, whose Watch streams end when the server stops.

    A Watch stream is an in-flight call like any other: left open, it would hold
    ``server.stop`` for the whole grace period. gRPC's client-side health checking
    keeps a server whose stream ended out of rotation until a new stream says
    SERVING, which a stopping server never sends.

    A Watch of a name outside ``HEALTH_SERVICES`` ends at once with NOT_FOUND, as a
    Check does. The health protocol keeps such a stream open in case the service is
    registered later, but this server's services are fixed at start, and an open
    stream holds its name (up to the receive limit) for as long as the client wants:
    a few hundred such streams on one connection took a pod past its memory limit.
    """

    def __init__(self) -> None:
        super().__init__()
        self._stopping = asyncio.Event()
        self._statuses: dict[str, int] = {}

    async def Watch(  # noqa: N802 - the name is the RPC's
        self,
        request: health_pb2.HealthCheckRequest,
        context: grpc.aio.ServicerContext[
            health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse
        ],
    ) -> None:
        if request.service not in HEALTH_SERVICES:
            await context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
        watching = await until_stopped(self._stopping, super().Watch(request, context))
        if watching is not None:
            watching.result()  # the stream's own error, if it failed

    async def set(self, service: str, status: int) -> None:
        await super().set(service, status)
        self._statuses[service] = status

    async def List(  # noqa: N802 - the name is the RPC's
        self, request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> Any:
        """Every name's status: the health protocol's List, which the library leaves out."""
        # Any: the type stubs of grpcio-health-checking predate List.
        response: Any = health_pb2.HealthListResponse()  # type: ignore[attr-defined]
        for name, status in self._statuses.items():
            response.statuses[name].status = status
        return response

    def end_watches(self) -> None:
        """End every Watch stream, and each one opened from now on, with status OK."""
        self._stopping.set()


async def _shut_down(
    config: ServerConfig,
    server: grpc.aio.Server,
    http: HttpServer,
    streams: tuple[DrainingHealth, DrainingReflection],
    signals: StopSignals,
) -> bool:
    """Drain in three steps (design section 6, docs/operations.md "Termination"); returns
    whether the grace period ran out with calls in flight, which were cut.

    1. ``""``, ``readiness`` and the service name turn NOT_SERVING, and HTTP
       ``/readyz`` 503 (``liveness`` and ``/healthz`` stay SERVING): probes and
       health-checking clients move away.
    2. Keep serving for the drain delay. Calls that clients sent before they saw
       NOT_SERVING are still answered; stopping at once would let gRPC core cancel
       the ones it had received but not yet handed over (grpc/grpc#41785).
    3. Stop both servers: listeners close, new calls are refused, calls in flight
       get ``grace_seconds`` to finish.
    """
    delay = signals.drain_delay(config.drain_delay_seconds)
    _log.info(
        "draining",
        signal=signals.first.name if signals.first else None,
        readiness="NOT_SERVING",
        drain_delay_seconds=delay,
        grace_seconds=config.grace_seconds,
        pid=os.getpid(),
    )
    health_servicer, reflection_servicer = streams
    for name in DRAINED_ON_SHUTDOWN:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    http.gateway.not_ready()
    served = await _seconds_taken(signals.sleep(delay))
    # StopSignals.drain_delay is 0 once a SIGINT has come: one that came during the
    # delay cut it short, which the stopping line says (it came unexplained seconds early).
    cut_by = "SIGINT" if delay > 0 and signals.drain_delay(delay) == 0 else None
    _log.info(
        "stopping",
        new_calls="refused",
        grace_seconds=config.grace_seconds,
        drain_delay_served_seconds=round(served, 3),
        drain_cut_by=cut_by,
        pid=os.getpid(),
    )
    grace = config.grace_seconds
    stopped = asyncio.gather(_seconds_taken(server.stop(grace)), http.stop())
    # Only once the stop has begun: a client re-opens an ended Watch, and that
    # new stream must meet a server that no longer accepts calls.
    health_servicer.end_watches()
    reflection_servicer.end_streams()
    grpc_seconds, _ = await stopped
    # grpc says nothing of the calls it cancelled as the grace ran out, and a call that
    # never ends (a stream whose client sends nothing) held the stop for all of it
    # unseen: only the time the stop took tells. A grace of 0 cuts calls by design, and
    # grpc then takes its wait as timed out whether or not a call was in flight.
    cut = [
        transport
        for transport, expired in (
            ("grpc", grace > 0 and grpc_seconds >= grace),
            ("http", http.gateway.drain_expired),
        )
        if expired
    ]
    if cut:
        _log.warning(
            "grace period ran out: calls still in flight were cut",
            grace_seconds=grace,
            transports=cut,
            pid=os.getpid(),
        )
    return bool(cut)


async def _seconds_taken(step: Awaitable[None]) -> float:
    """How long ``step`` took to finish, in seconds of the event loop's clock."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    await step
    return loop.time() - began


async def _start_gateway(
    config: ServerConfig, api: KrypkasinoApi, runner: CallRunner, metrics: ServiceMetrics | None
) -> HttpServer | None:
    """The HTTP/JSON gateway on ``config.http_port``; None (logged) if it cannot listen."""
    gateway = HttpGateway(
        api,
        runner,
        SERVICES,
        max_request_bytes=config.max_request_bytes,
        cors=CorsPolicy(config.cors_origins),
        openapi=served_document(),
        on_refused_preflight=None if metrics is None else metrics.cors_preflights_refused.inc,
    )
    try:
        return await start_http(
            gateway,
            config.host,
            config.http_port,
            reuse_port=config.workers > 1,
            grace_seconds=config.grace_seconds,
            keepalive_seconds=config.http_keepalive_seconds,
        )
    except OSError as error:
        cannot_listen("http", config.host, config.http_port, str(error))
        return None


def _warn_plain_state(keys: KeyRing) -> None:
    """Plain mode is for debugging (docs/api.md). With configured keys it also opens their
    sealed tokens and answers them in the clear, every hand included, so the warning names
    those keys: a debugging server given the production keys should not pass unnoticed."""
    warning = "plain state tokens: anyone can read and forge game states (debugging only)"
    if keys.is_ephemeral:
        _log.warning(warning)
    else:
        _log.warning(
            f"{warning}; sealed tokens of these keys are opened and answered in the clear",
            key_ids=keys.hex_ids(),
        )


def _ephemeral_key_warning(plain_state: bool) -> str:
    """The start-up warning of a server with no configured keys. A plain-state server
    seals no state, so its state tokens outlive it; only its seat tokens, made under the
    key it made up, die with it (a review found "tokens die" told of both)."""
    if plain_state:
        return (
            "no state keys configured: using an ephemeral key for seat tokens; they die "
            "with this server and other replicas cannot verify them (state tokens are "
            "plain, which any --plain-state server opens; set CARDRULES_STATE_KEYS)"
        )
    return (
        "no state keys configured: using an ephemeral key; tokens die with this "
        "server and other replicas cannot open them (set CARDRULES_STATE_KEYS)"
    )


def serve(config: ServerConfig, pending: PendingSignals) -> int:
    """Start the configured server(s); returns the process exit status.

    ``pending`` holds the stop signals that came while the process started. An
    exception let through is logged (``server crashed``) and gives 1.
    """
    configure_logging(config.log_format, config.log_level)
    return status_or_crash(functools.partial(_serve, config, pending), _log, "server crashed")


def _serve(config: ServerConfig, pending: PendingSignals) -> int:
    if unknown := unknown_variables():  # names only: a value may be a key
        _log.warning(
            "unknown CARDRULES_* variables, ignored: misspelt?",
            variables=unknown,
            did_you_mean=meant_variables(unknown),
        )
    raise_open_files_limit()
    keys = load_keys(config)  # resolve() has refused bad keys already, naming their source
    if keys.is_ephemeral:
        _log.warning(_ephemeral_key_warning(config.plain_state))
    if config.keys_on_command_line:
        # /proc/PID/cmdline is readable by every user of the machine, unlike environ.
        _log.warning(
            "state keys given on the command line: any user of this machine can read "
            "them (ps); set CARDRULES_STATE_KEYS or --state-keys-file instead"
        )
    for event, fields in key_warnings(config, keys):
        _log.warning(event, **fields)
    if config.plain_state:
        _warn_plain_state(keys)
    if config.workers > 1:
        # The supervisor's pid is what systemd (MainPID) and ``docker top`` show; before
        # the ports are claimed, so that a start refused there has it too.
        _log.info(
            "starting workers", pid=os.getpid(), workers=config.workers, state_fields=state_fields()
        )
    # Imported here: service.supervisor imports this module (its workers run run_servers).
    from service.supervisor import _log_exit, _supervise

    claims: list[socket.socket] = []  # held while the workers serve (``service.ports.claim``)
    try:
        if not ports_free(config, claims):
            if config.workers > 1:
                _log_exit(1)
            return 1
        if multiprocess_enabled():
            clear_multiprocess_dir()
            reserve_value_files()
        if config.workers > 1:
            return _supervise(config, keys, pending, claims)
    finally:
        for claim in claims:
            claim.close()
    # A single process forks nothing, but as a container's PID 1 it inherits every process
    # an exec (kubectl exec, docker exec) leaves behind: ignoring SIGCHLD has the kernel
    # reap them, where each would stay a zombie, holding a pid against the pod's limit.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    registry = CollectorRegistry()
    metrics = new_metrics(registry)
    add_process_metrics(registry)
    with signals_blocked(STOP_SIGNALS):  # for the metrics server's threads
        stop_metrics = _start_metrics(config, keys, registry)
    if stop_metrics is None:
        return 1
    try:
        return asyncio.run(run_servers(config, keys, metrics, pending))
    finally:
        stop_metrics()


def _start_metrics(
    config: ServerConfig, keys: KeyRing, registry: CollectorRegistry
) -> Callable[[], None] | None:
    """Serve ``registry`` on the metrics port, with how this server seals its state
    tokens (``cardrules_state_sealing``); None (logged) if it cannot listen."""
    if not config.metrics_port:
        return lambda: None
    if config.plain_state:
        add_sealing_metric(registry, PLAIN, "")
    else:
        key_id = KeyRing.key_id(keys.keys[0]).hex()
        add_sealing_metric(registry, EPHEMERAL if keys.is_ephemeral else SEALED, key_id)
    # Every key, in plain mode too: its keys still open sealed tokens and sign seat tokens.
    add_keys_metric(registry, keys.hex_ids())
    try:
        server = start_metrics_http(config.metrics_port, registry, config.host)
    except OSError as error:  # the port is taken, or the host is no address of this machine
        cannot_listen("metrics", config.host, config.metrics_port, str(error))
        return None
    _log.info(
        "metrics",
        address=host_port(config.host, server.port),
        addresses=server.hosts,
        path="/metrics",
    )
    return server


@dataclass(frozen=True, slots=True)
class SupervisorLink:
    """What a worker holds of its supervisor: the read end of the lifeline pipe, and
    its own ``Heartbeats`` slot to beat."""

    lifeline: int
    beat: Callable[[], None]


def _follow_supervisor(signals: StopSignals, supervisor: SupervisorLink) -> None:
    """Beat for the supervisor's watchdog; drain and stop, as on SIGTERM, once it is gone.

    The lifeline reads end of file when the supervisor exits, also when it is
    killed (``kill -9``, the OOM killer) and cannot stop its workers. Orphaned
    workers would otherwise serve on, with SO_REUSEPORT beside a restarted
    server and its new keys and flags. If the supervisor died before the
    worker got here, the end of file is already there.
    """
    loop = asyncio.get_running_loop()

    def cut() -> None:
        loop.remove_reader(supervisor.lifeline)
        _log.error("supervisor exited", pid=os.getpid())
        signals.stop(signal.SIGTERM)

    loop.add_reader(supervisor.lifeline, cut)
    keep_beating(loop, supervisor.beat)
