"""Prometheus metrics: go-grpc-prometheus server metrics and domain counters (design section 6).

Nothing here creates a metric at import time: ``ServiceMetrics`` makes them,
so a test or a worker can hold its own registry.

Multiprocess mode (``--workers N``). prometheus_client picks its value storage
once, when it is first imported: if ``PROMETHEUS_MULTIPROC_DIR`` is set then,
every value lives in an mmap file ``<dir>/<kind>_<pid>.db``; otherwise in
process memory, where the other workers and the scraper can never see it. So:

1. ``cardrules serve`` (``serve_command.prepare_multiprocess_dir``) makes a
   temporary directory or checks the one given, locks it (a folder another server
   uses is refused), and sets
   ``PROMETHEUS_MULTIPROC_DIR`` *before anything imports prometheus_client*
   (this module included); once the ports are known free, ``clear_multiprocess_dir``
   empties it, and the supervisor forks the workers;
2. each worker builds its ``ServiceMetrics`` after the fork, with
   ``registry=None`` (or a private ``CollectorRegistry`` that is never served):
   the values go to the worker's own files whatever the registry;
3. one process serves ``metrics_http.start_metrics_http(port, multiprocess_registry())``,
   which sums every worker's files at each scrape;
4. when a worker exits the supervisor calls ``worker_exited(pid)``.

``multiprocess_registry`` refuses to run when the variable came too late,
since the scrape would then silently report nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple, get_args

import grpc
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    Metric,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    values,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

from engine.krypkasino.config import seatings
from engine.krypkasino.moves import SweepKind
from engine.krypkasino.play import Reason
from service.codec import MOVE_KIND_LABELS, move_kind_label
from service.config import MULTIPROC_ENV, MULTIPROC_VALUE_FILE
from service.logs import get_logger
from service.tokens import SeatTokenReason, TokenReason
from service.value_space import VALUE_FILE_BYTES, reserve

_log = get_logger("cardrules.metrics")

# Go's codes.Code.String(), indexed by the numeric code (go-grpc-prometheus label values).
GRPC_CODES: tuple[str, ...] = (
    "OK",
    "Canceled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
)

#: Every RPC of the service is unary; streaming RPCs would need their own label value.
GRPC_TYPE = "unary"

#: Upper bounds in seconds: a ``Play`` is handled in about 0.1 to a few ms (docs/benchmarks.md:
#: 85 µs in a loop, 250 to 900 µs of CPU in a loaded server, more in long matches); 1 s is
#: pathological.
HANDLING_BUCKETS: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
)

MOVE_KINDS: tuple[str, ...] = tuple(MOVE_KIND_LABELS.values())
SWEEP_KINDS: tuple[str, ...] = tuple(
    move_kind_label(False, sweep) for sweep in SweepKind if sweep is not SweepKind.NONE
)

#: The ``reason`` values of ``cardrules_state_tokens_refused_total``: every refusal of a
#: state token that was sent (design section 5): what the sealer refuses
#: (``TokenReason``) and a token that opens but holds no game this release accepts.
#: ``STATE_MISSING`` is no token at all, so not counted.
STATE_TOKEN_REFUSALS: tuple[str, ...] = (*get_args(TokenReason), "STATE_INVALID")

#: What ``cardrules_seat_tokens_refused_total`` counts under a key id no key of the
#: server has: answered ``SEAT_TOKEN_INVALID`` (metadata ``key_id``), and named as a
#: state token under an unknown key is, so that one selector finds both.
SEAT_TOKEN_UNKNOWN_KEY = "TOKEN_UNKNOWN_KEY"

#: The ``reason`` values of ``cardrules_seat_tokens_refused_total``: every refusal of a
#: seat token (design section 5), the ErrorInfo reason (``SeatTokenReason``) but for a
#: token under a key the server lacks (``SEAT_TOKEN_UNKNOWN_KEY``).
SEAT_TOKEN_REFUSALS: tuple[str, ...] = (*get_args(SeatTokenReason), SEAT_TOKEN_UNKNOWN_KEY)


class GameLabels(NamedTuple):
    """The series ``ServiceMetrics`` pre-creates for a game: its illegal-move reasons
    (ErrorInfo reasons, design section 5) and its seatings, ``(players, teams)``, whose
    games started in the default variant are counted from zero."""

    reasons: tuple[str, ...]
    seatings: tuple[tuple[int, str], ...]


#: Game name -> the labels pre-created for it.
DEFAULT_GAMES: Mapping[str, GameLabels] = {
    "krypkasino": GameLabels(
        reasons=tuple(reason.value for reason in Reason),
        seatings=tuple((players, teams.value) for players, teams in seatings()),
    ),
}

_GRPC_LABELS = ("grpc_type", "grpc_service", "grpc_method")


def code_label(code: grpc.StatusCode) -> str:
    """``StatusCode.INVALID_ARGUMENT`` -> ``"InvalidArgument"`` (Go's spelling, ``Canceled``)."""
    number: int = code.value[0]
    return GRPC_CODES[number]


#: Variants each process names in ``cardrules_games_started_total``; any further one
#: is counted as ``other``. ``NewGame`` needs no token, so without a bound anyone could
#: make a series for each of the 4,608 valid combinations of players, teams and flags.
MAX_NAMED_VARIANTS = 32
OTHER_VARIANT = "other"
#: The ``variant`` of a game with no rule flag enabled, pre-created for every seating.
DEFAULT_VARIANT = "default"


def variant_label(enabled: Iterable[str]) -> str:
    """The ``variant`` label: enabled rule names joined by ``+``, or ``default``.

    Pass ``Rules.enabled()``; the names come from the engine. ``game_started``
    bounds how many it names (``MAX_NAMED_VARIANTS``).
    """
    names = "+".join(enabled)
    return names or DEFAULT_VARIANT


class _RpcSeries(NamedTuple):
    """The go-grpc-prometheus series of one method."""

    started: Counter
    received: Counter
    sent: Counter
    seconds: Histogram
    handled: dict[str, Counter]
    retried: Counter


class ServiceMetrics:
    """The server's metrics, every known series created at zero (design section 6).

    ``methods`` maps a full service name to its method names; ``games`` maps a
    game name to the labels of its own series. ``registry=None`` registers nothing
    (multiprocess workers, see the module docstring).
    """

    def __init__(
        self,
        registry: CollectorRegistry | None,
        methods: Mapping[str, Sequence[str]],
        *,
        games: Mapping[str, GameLabels] = DEFAULT_GAMES,
    ) -> None:
        # go-grpc-prometheus exports no *_created series; neither do we.
        disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped upstream
        self.started = Counter(
            "grpc_server_started_total",
            "Total number of RPCs started on the server.",
            _GRPC_LABELS,
            registry=registry,
        )
        self.handled = Counter(
            "grpc_server_handled_total",
            "Total number of RPCs completed on the server, regardless of success or failure.",
            (*_GRPC_LABELS, "grpc_code"),
            registry=registry,
        )
        self.msg_received = Counter(
            "grpc_server_msg_received_total",
            "Total number of RPC stream messages received on the server.",
            _GRPC_LABELS,
            registry=registry,
        )
        self.msg_sent = Counter(
            "grpc_server_msg_sent_total",
            "Total number of gRPC stream messages sent by the server.",
            _GRPC_LABELS,
            registry=registry,
        )
        self.handling_seconds = Histogram(
            "grpc_server_handling_seconds",
            "Histogram of response latency (seconds) of gRPC that had been "
            "application-level handled by the server.",
            _GRPC_LABELS,
            buckets=HANDLING_BUCKETS,
            registry=registry,
        )
        self.retry_attempts = Counter(
            "cardrules_retry_attempts_total",
            "RPCs that are a client's retry of an earlier attempt of the same call, which "
            "gRPC's retry policy sends with grpc-previous-rpc-attempts.",
            _GRPC_LABELS,
            registry=registry,
        )
        self.games_started = Counter(
            "cardrules_games_started_total",
            "Games started, by game, player count, team mode and variant.",
            ("game", "players", "teams", "variant"),
            registry=registry,
        )
        self.moves = Counter(
            "cardrules_moves_total",
            "Legal moves played, by game and kind (crawl, capture, sweep, double_sweep).",
            ("game", "kind"),
            registry=registry,
        )
        self.illegal_moves = Counter(
            "cardrules_illegal_moves_total",
            "Moves refused by the rules, by game and reason.",
            ("game", "reason"),
            registry=registry,
        )
        self.sweeps = Counter(
            "cardrules_sweeps_total",
            "Sweeps made, by game and kind (sweep, double_sweep).",
            ("game", "kind"),
            registry=registry,
        )
        self.seat_tokens_renewed = Counter(
            "cardrules_seat_tokens_renewed_total",
            "Seat tokens sent under a state key that is no longer the first, answered "
            "with the seat's token under the current key, by game.",
            ("game",),
            registry=registry,
        )
        self.state_tokens_renewed = Counter(
            "cardrules_state_tokens_renewed_total",
            "State tokens sent to a read (LegalMoves, Score, GetView) sealed under a state "
            "key that is no longer the first, answered with the state sealed under the "
            "current key, by game.",
            ("game",),
            registry=registry,
        )
        self.state_tokens_refused = Counter(
            "cardrules_state_tokens_refused_total",
            "State tokens refused, by game and reason (the ErrorInfo reason: "
            "TOKEN_UNKNOWN_KEY, a key this server does not have; TOKEN_FROM_NEWER_RELEASE, "
            "...). Refusals of calls answered DEADLINE_EXCEEDED are not counted.",
            ("game", "reason"),
            registry=registry,
        )
        self.seat_tokens_refused = Counter(
            "cardrules_seat_tokens_refused_total",
            "Seat tokens refused, by game and reason: SEAT_TOKEN_MISSING, SEAT_TOKEN_INVALID "
            "(the ErrorInfo reasons) or TOKEN_UNKNOWN_KEY, a token under a key this server "
            "does not have (answered SEAT_TOKEN_INVALID with its key_id). Refusals of calls "
            "answered DEADLINE_EXCEEDED are not counted.",
            ("game", "reason"),
            registry=registry,
        )
        self.log_lines_dropped = Counter(
            "cardrules_log_lines_dropped_total",
            "Log lines stdout refused (a reader that went away, a full disk): each is lost, "
            "the call it was about was served.",
            registry=registry,
        )
        # By no label, as Envoy's cors origin_invalid: anyone can send any Origin, and a
        # label of it would let them make a series each.
        self.cors_preflights_refused = Counter(
            "cardrules_http_cors_preflights_refused_total",
            "CORS preflights the HTTP gateway refused (an origin not in --cors-origins, or "
            "none configured): the browser's page saw only 'blocked by CORS policy'.",
            registry=registry,
        )
        self._reported_full = False
        self._named_variants = {DEFAULT_VARIANT}
        # Pre-create (as go-grpc-prometheus's InitializeMetrics does) so that
        # rate() and absent-series alerts work from the first scrape.
        self._rpcs: dict[tuple[str, str], _RpcSeries] = {}
        for service, names in methods.items():
            for method in names:
                self._rpc(service, method)
        # The children a move counts in, looked up once: a Play counts one move.
        self._move_series: dict[tuple[str, str], tuple[Counter, ...]] = {}
        for game, labels in games.items():
            for kind in MOVE_KINDS:
                self._move_counters(game, kind)
            for reason in labels.reasons:
                self.illegal_moves.labels(game, reason)
            for players, teams in labels.seatings:
                self.games_started.labels(game, str(players), teams, DEFAULT_VARIANT)
            self.seat_tokens_renewed.labels(game)
            self.state_tokens_renewed.labels(game)
            for reason in STATE_TOKEN_REFUSALS:
                self.state_tokens_refused.labels(game, reason)
            for reason in SEAT_TOKEN_REFUSALS:
                self.seat_tokens_refused.labels(game, reason)

    def _rpc(self, service: str, method: str) -> _RpcSeries:
        # Children are looked up once per method: .labels() costs about a microsecond a call.
        series = self._rpcs.get((service, method))
        if series is None:
            labels = (GRPC_TYPE, service, method)
            series = _RpcSeries(
                started=self.started.labels(*labels),
                received=self.msg_received.labels(*labels),
                sent=self.msg_sent.labels(*labels),
                seconds=self.handling_seconds.labels(*labels),
                handled={code: self.handled.labels(*labels, code) for code in GRPC_CODES},
                retried=self.retry_attempts.labels(*labels),
            )
            self._rpcs[service, method] = series
        return series

    def rpc_started(
        self, service: str, method: str, received: bool = True, retried: bool = False
    ) -> None:
        """A unary RPC began, with its request message ``received``: always over gRPC, not
        for an HTTP call refused before or while its body was read; ``retried`` if it is a
        client's retry of an earlier attempt of its call."""
        series = self._rpc(service, method)
        series.started.inc()
        if received:
            series.received.inc()
        if retried:
            series.retried.inc()

    def rpc_handled(self, service: str, method: str, code: str, seconds: float) -> None:
        """A unary RPC ended with ``code`` (a ``GRPC_CODES`` value) after ``seconds``."""
        series = self._rpc(service, method)
        handled = series.handled.get(code)
        if handled is None:
            raise ValueError(f"not a go-grpc-prometheus code label: {code!r}")
        handled.inc()
        series.seconds.observe(seconds)
        if code == "OK":
            # A unary RPC sends its one response message only on success.
            series.sent.inc()

    def game_started(self, game: str, players: int, teams: str, variant: str) -> None:
        """A ``NewGame`` succeeded; ``variant`` comes from ``variant_label``.

        The one series made while serving (the others, and this one's for the default
        variant of every seating, are made at start): with the
        values in files (``PROMETHEUS_MULTIPROC_DIR``, which workers set), a new one
        may need more room in the metrics folder than is left
        (``ValueFileFullError``), or a descriptor to map it when none is left. The
        game is started all the same; the series is lost. Past ``MAX_NAMED_VARIANTS``
        variants a new one counts as ``other``.
        """
        if variant not in self._named_variants:
            if len(self._named_variants) < MAX_NAMED_VARIANTS:
                self._named_variants.add(variant)
            else:
                variant = OTHER_VARIANT
        try:
            series = self.games_started.labels(game, str(players), teams, variant)
        except OSError as error:  # ValueFileFullError, or no descriptor left to map it
            if not self._reported_full:
                self._reported_full = True
                _log.error(
                    "metrics values lost", series="cardrules_games_started_total", error=str(error)
                )
            return
        series.inc()

    def seat_token_renewed(self, game: str) -> None:
        """A response carries a seat token renewed under the current key (key rotation)."""
        self.seat_tokens_renewed.labels(game).inc()

    def state_token_renewed(self, game: str) -> None:
        """A read answered with its state sealed anew under the current key (key rotation)."""
        self.state_tokens_renewed.labels(game).inc()

    def state_token_refused(self, game: str, reason: str) -> None:
        """A state token was refused with ``reason``, one of ``STATE_TOKEN_REFUSALS``:
        refusals of ``TOKEN_UNKNOWN_KEY`` mean replicas with different key lists, or a
        key retired while games still had tokens under it (docs/operations.md)."""
        if reason not in STATE_TOKEN_REFUSALS:
            raise ValueError(f"not a state token refusal: {reason!r}")
        self.state_tokens_refused.labels(game, reason).inc()

    def seat_token_refused(self, game: str, reason: str) -> None:
        """A seat token was refused with ``reason``, one of ``SEAT_TOKEN_REFUSALS``:
        refusals of ``TOKEN_UNKNOWN_KEY`` mean a key retired while games still had seat
        tokens under it, replicas with different key lists, or junk tokens
        (docs/operations.md)."""
        if reason not in SEAT_TOKEN_REFUSALS:
            raise ValueError(f"not a seat token refusal: {reason!r}")
        self.seat_tokens_refused.labels(game, reason).inc()

    def move_played(self, game: str, kind: str) -> None:
        """A legal move was played; sweeps also count in ``cardrules_sweeps_total``."""
        for counter in self._move_counters(game, kind):
            counter.inc()

    def _move_counters(self, game: str, kind: str) -> tuple[Counter, ...]:
        """The children a move of ``kind`` counts in (sweeps count twice), looked up once."""
        series = self._move_series.get((game, kind))
        if series is None:
            if kind not in MOVE_KINDS:
                raise ValueError(f"unknown move kind {kind!r}; expected one of {MOVE_KINDS}")
            series = (self.moves.labels(game, kind),)
            if kind in SWEEP_KINDS:
                series += (self.sweeps.labels(game, kind),)
            self._move_series[game, kind] = series
        return series

    def illegal_move(self, game: str, reason: str) -> None:
        """The rules refused a move with ``reason`` (the ErrorInfo reason)."""
        self.illegal_moves.labels(game, reason).inc()


def multiprocess_enabled() -> bool:
    """Whether prometheus_client was imported with ``PROMETHEUS_MULTIPROC_DIR`` set."""
    return values.ValueClass is not values.MutexValue


#: How a server seals state tokens (``cardrules_state_sealing``'s ``mode``).
SEALED, EPHEMERAL, PLAIN = "keys", "ephemeral", "plain"


class _SealingCollector(Collector):
    """``cardrules_state_sealing``: 1, labelled with how this server seals state tokens
    and the id of the key that seals them. Fixed at start and the same in every worker,
    so the process that serves the metrics says it itself: no file of values."""

    def __init__(self, mode: str, primary_key_id: str) -> None:
        self._labels = [mode, primary_key_id]

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            "cardrules_state_sealing",
            "How this server seals state tokens, 1 for the mode in force: keys (the "
            "configured ones), ephemeral (a key made at start: tokens die with the server "
            "and other replicas cannot open them) or plain (unsealed: anyone can read and "
            "forge states); primary_key_id is the id of the key that seals (none in plain).",
            labels=("mode", "primary_key_id"),
        )
        family.add_metric(self._labels, 1)
        yield family


def add_sealing_metric(registry: CollectorRegistry, mode: str, primary_key_id: str) -> None:
    """``cardrules_state_sealing`` in ``registry``: ``mode`` is ``SEALED``, ``EPHEMERAL``
    or ``PLAIN``, ``primary_key_id`` the sealing key's id in hex ("" in plain mode)."""
    registry.register(_SealingCollector(mode, primary_key_id))


#: ``cardrules_state_keys``' ``role``: the key that seals state tokens and issues seat
#: tokens (the first of the list), and each other key, which only opens and verifies them.
PRIMARY, OPENING = "primary", "opening"


class _KeysCollector(Collector):
    """``cardrules_state_keys``: 1 for each key of the server's list, labelled with its id
    and role. ``cardrules_state_sealing`` names the primary key alone, so pods on
    ``NEW,OLD`` and on ``NEW`` looked alike there. Fixed at start, as that one is."""

    def __init__(self, key_ids: Sequence[str]) -> None:
        self._labels = [
            [key_id, PRIMARY if i == 0 else OPENING] for i, key_id in enumerate(key_ids)
        ]

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            "cardrules_state_keys",
            "1 for each state key this server holds, by its key id (what `cardrules keyid` "
            "prints) and role: primary (the first key: seals state tokens, issues seat "
            "tokens) or opening (opens and verifies only). A pod that lacks a key refuses "
            "the tokens under it TOKEN_UNKNOWN_KEY.",
            labels=("key_id", "role"),
        )
        for labels in self._labels:
            family.add_metric(labels, 1)
        yield family


def add_keys_metric(registry: CollectorRegistry, key_ids: Sequence[str]) -> None:
    """``cardrules_state_keys`` in ``registry``: ``key_ids`` are the ids in hex of the
    server's keys in their order, the primary first."""
    registry.register(_KeysCollector(key_ids))


def add_process_metrics(registry: CollectorRegistry) -> None:
    """The process's own CPU, memory, file descriptors and Python version (``process_*``,
    ``python_info``), as the default registry has them: a server of one process."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)


#: The ``worker`` label of the supervisor's own ``process_*`` series.
SUPERVISOR = "supervisor"


class _WorkersProcessCollector(Collector):
    """``process_*`` of the supervisor and of each live worker, labelled ``worker``.

    A worker's metrics in multiprocess mode are values in files, and prometheus_client
    keeps none for ``process_*``: read at the scrape, from ``/proc``, by the process that
    serves them, they are each process's own as a server of one process has them."""

    def __init__(self, workers: Mapping[int, int]) -> None:
        self._workers = workers
        self._readers: dict[int, ProcessCollector] = {}

    def collect(self) -> Iterable[Metric]:
        # A copy: the supervisor's main thread removes the workers it reaps meanwhile.
        live = [(os.getpid(), SUPERVISOR)] + [
            (pid, str(worker)) for pid, worker in sorted(dict(self._workers).items())
        ]
        families: dict[str, Metric] = {}
        for pid, worker in live:
            if pid not in self._readers:
                self._readers[pid] = _process_reader(pid)
            for metric in self._readers[pid].collect():
                family = families.setdefault(
                    metric.name, Metric(metric.name, metric.documentation, metric.type)
                )
                for sample in metric.samples:
                    family.add_sample(sample.name, {"worker": worker}, sample.value)
        return families.values()


def _process_reader(pid: int) -> ProcessCollector:
    return ProcessCollector(pid=lambda: pid, registry=None)


def add_workers_process_metrics(registry: CollectorRegistry, workers: Mapping[int, int]) -> None:
    """``process_*`` for the supervisor (``worker="supervisor"``) and each worker by its
    number (``workers``: number by pid, which the supervisor updates), and ``python_info``."""
    registry.register(_WorkersProcessCollector(workers))
    PlatformCollector(registry=registry)


def clear_multiprocess_dir() -> None:
    """Delete the values an earlier run left in ``PROMETHEUS_MULTIPROC_DIR``, which would
    be added in. Called once the ports are known free and before any value is made:
    a second server that is refused at start must not wipe a running one's values.
    The folder is locked by then (``serve_command.prepare_multiprocess_dir``): one
    that another server uses was refused, and its lock file, no ``*.db``, is kept."""
    for stale in Path(os.environ[MULTIPROC_ENV]).glob("*.db"):
        if MULTIPROC_VALUE_FILE.fullmatch(stale.name):
            stale.unlink(missing_ok=True)


def reserve_value_files() -> None:
    """Make prometheus_client reserve the space of its files of values before it maps them.

    It makes and grows each file sparse (``truncate``) and writes to it through a
    memory map: on a filesystem that is full (a small tmpfs, an ``emptyDir`` with a
    size limit, a disk something else filled) the kernel kills the process with
    SIGBUS at the first write to a page it cannot back, in the middle of a call.
    With the space reserved (``posix_fallocate``) a full folder is an error instead:
    ``ValueFileFullError``. Call once multiprocess mode is on, before any value is made.
    """
    values.MmapedDict = _ReservedMmapedDict  # type: ignore[attr-defined]  # untyped upstream


class _ReservedMmapedDict(MmapedDict):
    """``MmapedDict`` whose file space is reserved before it is mapped or written."""

    def __init__(self, filename: str, read_mode: bool = False) -> None:
        if not read_mode:
            _reserve_new_file(filename)
        super().__init__(filename, read_mode)  # type: ignore[no-untyped-call]  # untyped upstream
        if not read_mode:
            # Opened to append ("a+b"), though only truncated and mapped: where the
            # filesystem has no fallocate (NFS, ramfs), glibc's posix_fallocate writes
            # the blocks itself, and refuses a descriptor that appends (EBADF).
            descriptor = self._f.fileno()
            flags = fcntl.fcntl(descriptor, fcntl.F_GETFL)
            fcntl.fcntl(descriptor, fcntl.F_SETFL, flags & ~os.O_APPEND)

    def _init_value(self, key: str) -> None:
        # The entry prometheus_client writes: its length, the key padded to 8 bytes, and
        # two doubles. It doubles the file until the entry fits, as reserved here first.
        encoded = len(key.encode("utf-8"))
        needed = self._used + 4 + encoded + (8 - (encoded + 4) % 8) + 16
        capacity = self._capacity
        while needed > capacity:
            capacity *= 2
        if capacity != self._capacity:
            reserve(self._f.fileno(), capacity, self._fname)
            # Mapped here, before anything changes: prometheus_client doubles its
            # capacity first, and a map that then fails (no descriptor left to map
            # with) left it writing past the end of the old map at the next new series.
            self._m = mmap.mmap(self._f.fileno(), capacity)
            self._capacity = capacity
        super()._init_value(key)  # type: ignore[no-untyped-call]  # untyped upstream


def _reserve_new_file(filename: str) -> None:
    """Create ``filename`` with ``VALUE_FILE_BYTES`` reserved, unless it has content.

    Reserved under another name, then renamed: a scrape that read the file while it was
    still empty failed whole (prometheus_client reads its first 4 bytes), and the
    metrics answered 503 as a worker started. The hidden name matches no file of values.
    """
    with contextlib.suppress(FileNotFoundError):
        if os.stat(filename).st_size:
            return
    folder, name = os.path.split(filename)
    unnamed = os.path.join(folder, f".{name}.new")
    descriptor = os.open(unnamed, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        reserve(descriptor, VALUE_FILE_BYTES, filename)
        os.rename(unnamed, filename)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(unnamed)
        raise
    finally:
        os.close(descriptor)


class MetricsFolderGoneError(RuntimeError):
    """The workers' shared metrics folder, or files in it, were deleted while they run."""


# The files of values that prometheus_client never deletes, not even for a dead worker
# (``mark_process_dead`` deletes only the files of live gauges).
_KEPT_FILES = ("counter_", "histogram_", "summary_")


class _SharedFolderCollector(Collector):
    """``MultiProcessCollector``, which finds fewer values or none at all once files of
    its folder are deleted (``rm -rf``, a cleaner of temporary files, which deletes
    files before folders), or the folder is replaced: a scrape would read as a server
    that served less or nothing. The workers' values live on in the deleted files
    they hold open, out of reach, so only a restart brings them back."""

    def __init__(self, folder: str) -> None:
        self._folder = folder
        self._identity = _identity(folder)
        self._seen: set[str] = set()
        self._values = MultiProcessCollector(None)  # type: ignore[no-untyped-call]  # untyped upstream

    def collect(self) -> Iterable[Metric]:
        if _identity(self._folder) != self._identity:
            raise self._gone(f"the workers' metrics folder {self._folder} is gone")
        kept = {name for name in os.listdir(self._folder) if name.startswith(_KEPT_FILES)}
        if lost := sorted(self._seen - kept):
            named = ", ".join(lost[:3]) + (", ..." if len(lost) > 3 else "")
            raise self._gone(
                f"{len(lost)} of the workers' metrics files in {self._folder} are gone ({named})"
            )
        self._seen |= kept
        return self._values.collect()  # type: ignore[no-untyped-call,no-any-return]  # untyped upstream

    @staticmethod
    def _gone(what: str) -> MetricsFolderGoneError:
        return MetricsFolderGoneError(
            f"{what}: their values cannot be read until the server is restarted"
        )


def _identity(folder: str) -> tuple[int, int] | None:
    """Which folder ``folder`` is (device and inode), None if there is none."""
    try:
        found = os.stat(folder)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


def multiprocess_registry() -> CollectorRegistry:
    """A fresh registry that sums every process's values at each collection."""
    if not multiprocess_enabled():
        raise RuntimeError(
            "prometheus_client was imported before PROMETHEUS_MULTIPROC_DIR was set; "
            "the supervisor must set it before importing service.metrics"
        )
    registry = CollectorRegistry()
    registry.register(_SharedFolderCollector(os.environ[MULTIPROC_ENV]))
    return registry


def worker_exited(pid: int) -> None:
    """Bookkeeping for a dead worker (``mark_process_dead``).

    Counters and histograms keep the dead worker's file, so totals never go
    back; only live-gauge files are removed.
    """
    mark_process_dead(pid)  # type: ignore[no-untyped-call]  # untyped upstream
