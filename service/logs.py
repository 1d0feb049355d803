"""structlog setup: JSON lines in production, console in a terminal (design section 6).

One line per request (``request_log_fields``), and never a state token, a
seat token, a hand or a key: ``service.log_redaction.redact`` runs on every
event, including the stdlib ``logging`` records of libraries (grpc), which are
rendered the same way. Tracebacks never include local variables, which could
hold any of those; an exception's arguments are scrubbed as values are
(``KeyError(token)`` would quote the token), and the HTTP server's exceptions
lose their message, which can quote the request.

The JSON path is on every request, so it is kept lean: structlog's
``JSONRenderer`` serializes with orjson, the timestamp is formatted once a
second, ``bound_logger`` resolves structlog's lazy proxy once, and the line
goes to ``sys.stdout.buffer`` as bytes in one write.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, TextIO, cast

import orjson
import structlog
from aiohttp.http_exceptions import BadHttpMessage
from aiohttp.web import RequestPayloadError
from grpc._cython.cygrpc import ExecuteBatchError  # type: ignore[import-not-found]  # untyped upstream
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, FilteringBoundLogger, Processor, WrappedLogger

from service.config import LOG_FORMATS, LOG_LEVELS
from service.log_redaction import (
    redact,
    withhold_request_text,
    withhold_secret_arguments,
)
from service.trace_context import Trace

if TYPE_CHECKING:
    from prometheus_client import Counter

# The names ``--log-level`` and ``--log-format`` take (``service.config``).
LEVELS: Mapping[str, int] = {
    name: logging.getLevelNamesMapping()[name.upper()] for name in LOG_LEVELS
}


_LEADING_KEYS = ("timestamp", "level", "event")


def _leading_keys_first(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Put ``timestamp``, ``level``, ``event`` first, so JSON lines read well in a terminal too."""
    ordered = {k: event_dict[k] for k in _LEADING_KEYS if k in event_dict}
    ordered.update(event_dict)
    return ordered


# (second since the epoch, its "YYYY-MM-DDTHH:MM:SS"): one tuple, so swapping it is atomic.
_stamped_second: tuple[int, str] = (-1, "")


def utc_timestamp(clock: Callable[[], int] = time.time_ns) -> str:
    """Now (``clock()`` nanoseconds since the epoch) in RFC 3339, UTC, always with six
    fraction digits and ``Z``: ``2026-05-09T13:50:07.123456Z`` (microseconds truncated,
    as ``datetime.now`` does), formatting the date and time once per second.

    ``isoformat`` (and structlog's ``TimeStamper``) omit the fraction when the
    microseconds are zero, about one line in a million, which strict parsers
    (Elasticsearch's ``strict_date_time``, ``%S.%LZ``) refuse: here it is ``.000000``
    (docs/operations.md, "Log lines").
    """
    global _stamped_second
    seconds, nanoseconds = divmod(clock(), 1_000_000_000)
    second, text = _stamped_second
    if second != seconds:
        text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _stamped_second = (seconds, text)
    return f"{text}.{nanoseconds // 1000:06d}Z"


def _add_timestamp(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    event_dict["timestamp"] = utc_timestamp()
    return event_dict


# Fields on every line of this process, whichever thread logs (contextvars would
# miss grpc's threads): the worker number under ``--workers N``.
_process_fields: dict[str, object] = {}


def bind_process_fields(**fields: object) -> None:
    """Add ``fields`` to every later log line of this process (e.g. ``worker=2``)."""
    _process_fields.update(fields)


def _add_process_fields(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    if _process_fields:
        event_dict.update(_process_fields)
    return event_dict


def _json_fallback(value: object) -> object:
    """For what JSON cannot hold: structlog's ``__structlog__`` protocol, else ``repr``."""
    try:
        # Duck-typed: any object may define structlog's hook, and ``object`` declares
        # none, so mypy cannot see it; the AttributeError is the test.
        return value.__structlog__()  # type: ignore[attr-defined]
    except AttributeError:
        return repr(value)


# Dataclasses and datetimes go to the fallback (``repr``), as with json.dumps.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def _dumps(event_dict: EventDict, **_json_dumps_options: Any) -> bytes:
    """One compact JSON object (orjson; json.dumps for what orjson refuses).

    The serializer of structlog's ``JSONRenderer``, whose ``json.dumps``
    options (a ``default``) are not needed: ``_json_fallback`` is orjson's.
    """
    try:
        return orjson.dumps(event_dict, default=_json_fallback, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError:
        pass
    try:
        # Non-str keys are rare and make every dump slower: only when needed.
        return orjson.dumps(
            event_dict,
            default=_json_fallback,
            option=_ORJSON_OPTIONS | orjson.OPT_NON_STR_KEYS,
        )
    except orjson.JSONEncodeError:
        # Lone surrogates, integers beyond 64 bits: json escapes or spells them.
        return json.dumps(event_dict, default=_json_fallback, separators=(",", ":")).encode()


def _json_text(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> str:
    """Renderer for stdlib records, whose formatter must return ``str``."""
    return _dumps(event_dict).decode()


def request_log_fields(
    *,
    request_id: str,
    method: str,
    code: str,
    duration_ms: float,
    game_id: str | None,
    transport: str,
    peer: str | None = None,
    attempt: int = 1,
    trace: Trace | None = None,
    seat: int | None = None,
    move_number: int | None = None,
    state_id: str | None = None,
    deal_source: str | None = None,
    draw_given: bool | None = None,
) -> dict[str, object]:
    """The fields of the one line logged per request (design section 6).

    ``game_id`` is always present (``null`` before a game exists); ``peer`` only
    when known; ``attempt`` only for a client's retry (2 or more); ``trace_id`` and
    ``parent_id`` only for a call with a valid W3C ``traceparent``
    (``service.trace_context``, ``trace_log_fields``). Log it as
    ``log.info("request", **request_log_fields(...))``.

    After ``game_id``, only when known (``CallInfo``), what places the call in its
    game: ``seat``, ``move_number``, ``state_id`` (two forks of one state share the
    move number, not the state id), and a NewGame's ``deal_source`` and ``draw_given``
    (docs/operations.md, "Log lines"). Never a card: a hand is no log's business.
    """
    fields: dict[str, object] = {
        "request_id": request_id,
        "method": method,
        "code": code,
        "duration_ms": round(duration_ms, 3),
        "game_id": game_id,
    }
    if seat is not None:
        fields["seat"] = seat
    if move_number is not None:
        fields["move_number"] = move_number
    if state_id is not None:
        fields["state_id"] = state_id
    if deal_source is not None:
        fields["deal_source"] = deal_source
    if draw_given is not None:
        fields["draw_given"] = draw_given
    fields["transport"] = transport
    if peer is not None:
        fields["peer"] = peer
    if attempt > 1:
        fields["attempt"] = attempt
    if trace is not None:
        fields.update(trace_log_fields(trace))
    return fields


def trace_log_fields(trace: Trace) -> dict[str, str]:
    """A traced call's fields on each of its lines (design section 6): the trace-id to
    find a call's lines from its trace, and the parent-id, the caller's span, to tell
    apart the lines of the calls of one trace (a client span joins one line)."""
    return {"trace_id": trace.trace_id, "parent_id": trace.parent_id}


class OncePerWindow:
    """Whether a line is due for an error that can come thousands of times a second:
    the first time, then at most once per ``window`` seconds. Not locked: a caller
    shared by threads holds its own lock around ``due``."""

    def __init__(self, window: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._window = window
        self._clock = clock
        self._last: float | None = None

    def due(self) -> bool:
        now = self._clock()
        if self._last is not None and now - self._last < self._window:
            return False
        self._last = now
        return True


class DroppedLines:
    """Log lines that stdout refused: its reader went away (a closed pipe), the disk is
    full. A request never fails for its log line: the line is lost and counted
    (``cardrules_log_lines_dropped_total``, through ``count_in``, which a worker or a
    single process calls; a supervisor's few lines are not counted), and the first
    loss of each process is reported on stderr."""

    def __init__(self) -> None:
        self.count = 0
        self.on_drop: Callable[[], None] | None = None

    def count_in(self, counter: Counter) -> None:
        """Count each line lost from now on in ``counter``, and those this process lost
        before it had one: its start's warnings and ``metrics`` line, which stdout full
        from the start refused before the metrics existed."""
        if self.count:
            counter.inc(self.count)
        self.on_drop = counter.inc

    def forked(self) -> None:
        """A forked worker starts its own count: a supervisor started with stdout
        already broken (``>/dev/full``) lost its ``starting workers`` line before the
        forks, and each worker, which inherited a count of 1, never said why its own
        lines were lost (docs/operations.md, ``CardrulesLogLinesDropped``)."""
        self.count = 0
        self.on_drop = None

    def record(self, error: BaseException) -> None:
        self.count += 1
        if self.on_drop is not None:
            self.on_drop()
        stderr = sys.stderr  # None if started closed: print would write to stdout
        if self.count == 1 and stderr is not None:
            with contextlib.suppress(Exception):  # stderr may be the same broken pipe
                # One write, as ``_NamedPrintLogger.msg`` does: workers that lose their
                # first lines together (stdout full from the start) interleaved their
                # notices on the stderr they share, print writing the newline apart.
                stderr.write(
                    f"cardrules: log lines of process {os.getpid()} are lost from now on, "
                    f"stdout refused one: {error!r}\n"
                )
                stderr.flush()


DROPPED_LINES = DroppedLines()
os.register_at_fork(after_in_child=DROPPED_LINES.forked)


def _stdout_refused(error: BaseException) -> bool:
    """Whether ``error`` is stdout refusing a write (a closed file raises ValueError),
    not a line that could not be made."""
    return isinstance(error, OSError) or (isinstance(error, ValueError) and sys.stdout.closed)


class _NamedPrintLogger(structlog.PrintLogger):
    """Prints to the current ``sys.stdout`` (structlog's default is the one seen at its import)."""

    def __init__(self, name: str | None) -> None:
        super().__init__(sys.stdout)
        self.name = name

    def msg(self, message: str | bytes) -> None:
        """One ``write`` per line: workers share stdout, and ``print`` writes the newline
        separately, so two unbuffered workers could interleave their lines.

        Bytes (JSON lines) skip the text layer when stdout has a binary buffer. A line
        stdout refuses is dropped (``DROPPED_LINES``).
        """
        try:
            _write_line(message)
        except (OSError, ValueError) as error:
            if not _stdout_refused(error):
                raise
            DROPPED_LINES.record(error)

    log = debug = info = warn = warning = err = error = critical = exception = fatal = msg


def unbuffer_std_streams() -> None:
    """Make stdout and stderr what ``python -u`` makes them (``PYTHONUNBUFFERED``, which
    the image sets), however the server was started.

    Every log line is flushed as it is written either way. What differs is a line
    the stream refuses: a buffered stream keeps it, writes it late or never, and
    fails once more when Python flushes it at exit, which turns status 0 into 120.
    """
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, io.TextIOWrapper) and isinstance(stream.buffer, io.BufferedWriter):
            stream.flush()
            raw = io.FileIO(stream.fileno(), "w", closefd=False)
            unbuffered = io.TextIOWrapper(
                raw, encoding=stream.encoding, errors=stream.errors, write_through=True
            )
            setattr(sys, name, unbuffered)


def _write_line(message: str | bytes) -> None:
    stream = sys.stdout
    if isinstance(message, str):
        try:
            stream.write(message + "\n")
        except UnicodeEncodeError:
            # Console lines quote what callers sent (an HTTP path): a character the
            # stream's encoding lacks (PYTHONIOENCODING=ascii, a Latin-1 terminal) is
            # escaped, never an error that would fail the call the line is about. The
            # text was encoded whole before any of it was written.
            encoding = stream.encoding
            stream.write((message + "\n").encode(encoding, "backslashreplace").decode(encoding))
        stream.flush()
        return
    buffer: _BinaryWriter | None = getattr(stream, "buffer", None)
    if buffer is None:
        stream.write(message.decode() + "\n")
        stream.flush()
        return
    # Text written to the stream and not yet flushed goes first, to keep the order.
    stream.flush()
    _write_all(buffer, message + b"\n")
    buffer.flush()


class _BinaryWriter(Protocol):
    """What ``_write_line`` writes bytes to: stdout's binary layer, a ``BinaryIO``; after
    ``unbuffer_std_streams`` the raw file, whose ``write`` returns None when a
    non-blocking stdout would block (``RawIOBase.write``)."""

    def write(self, data: memoryview, /) -> int | None: ...

    def flush(self) -> None: ...


def _write_all(buffer: _BinaryWriter, data: bytes) -> None:
    """Write all of ``data``: unbuffered (``unbuffer_std_streams``), ``buffer`` is the raw
    file, and a signal handled while a write waits on a full pipe ends it part-way
    (the kernel's short write, which Python retries only if nothing went): the rest of
    the line, its newline too, would be lost and the next line glued to it."""
    view = memoryview(data)
    while view:
        written = buffer.write(view)
        if written is None:  # a non-blocking stdout that would block: as before, dropped
            return
        view = view[written:]


def _logger_factory(*args: Any) -> _NamedPrintLogger:
    return _NamedPrintLogger(args[0] if args else None)


def _add_logger_name(logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    record = event_dict.get("_record")
    name = record.name if record is not None else getattr(logger, "name", None)
    if name:
        event_dict["logger"] = name
    return event_dict


class _StdoutHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stdout`` is at emit time (it may be replaced, e.g. by tests)."""

    @property
    def stream(self) -> TextIO:
        return sys.stdout

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (stdlib name)
        """A record stdout refused is dropped as structlog's lines are; any other error
        (a record that cannot be formatted) goes to stderr as the stdlib reports it."""
        error = sys.exc_info()[1]
        if error is not None and _stdout_refused(error):
            DROPPED_LINES.record(error)
        else:
            super().handleError(record)


def _use_console(fmt: str) -> bool:
    fmt = fmt.lower()
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {LOG_FORMATS}, not {fmt!r}")
    if fmt == "auto":
        return sys.stdout.isatty()
    return fmt == "console"


def _colors(environ: Mapping[str, str]) -> bool:
    """ANSI colours in the console format: on a terminal, unless ``NO_COLOR`` is set to
    anything but empty (no-color.org) or ``TERM`` is ``dumb`` (a terminal that shows
    escapes as text: Emacs' shell, a serial console; docs/operations.md)."""
    return sys.stdout.isatty() and not environ.get("NO_COLOR") and environ.get("TERM") != "dumb"


def configure_logging(fmt: str = "auto", level: str = "info") -> None:
    """Set up structlog and the stdlib root logger; calling it again replaces the setup.

    ``fmt``: ``json`` (one object per line on stdout: ``timestamp`` RFC 3339 UTC,
    ``level``, ``event``, then the fields), ``console`` (human), or ``auto``
    (console when stdout is a terminal, else json). ``level``: a ``LEVELS`` name.
    """
    try:
        threshold = LEVELS[level.lower()]
    except KeyError:
        raise ValueError(f"log level must be one of {tuple(LEVELS)}, not {level!r}") from None
    console = _use_console(fmt)

    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        _add_logger_name,
        _add_timestamp,
        _add_process_fields,
    ]
    processors: list[Processor]
    renderer: Processor
    if console:
        # plain_traceback: the rich formatter, if rich were installed, shows locals.
        renderer = structlog.dev.ConsoleRenderer(
            colors=_colors(os.environ), exception_formatter=structlog.dev.plain_traceback
        )
        tail: list[Processor] = [
            structlog.processors.StackInfoRenderer(),
            withhold_secret_arguments,
            redact,
        ]
        processors = [*shared, *tail, renderer]
    else:
        renderer = _json_text
        tail = [
            structlog.processors.StackInfoRenderer(),
            withhold_secret_arguments,
            # show_locals defaults to True: a frame's locals may hold a token or a hand.
            structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False)),
            redact,
            _leading_keys_first,
        ]
        # Bytes for structlog's loggers (one write to stdout's buffer), text for stdlib records.
        processors = [*shared, *tail, structlog.processors.JSONRenderer(serializer=_dumps)]

    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=_logger_factory,
        # Not cached, so a later configure_logging applies to existing loggers; hot
        # paths bind theirs once (``bound_logger``).
        cache_logger_on_first_use=False,
    )

    # Library records (grpc, asyncio) through the same processors and renderer.
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            *shared,
            structlog.stdlib.ExtraAdder(),
            withhold_request_text,
            *tail,
        ],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _StdoutHandler)]:
        root.removeHandler(handler)
    handler = _StdoutHandler()
    handler.setFormatter(formatter)
    root.addHandler(handler)
    root.setLevel(threshold)
    for name, kinds in _CLIENT_ERRORS.items():
        library = logging.getLogger(name)
        for old in [f for f in library.filters if isinstance(f, _ClientErrorsAtDebug)]:
            library.removeFilter(old)
        library.addFilter(_ClientErrorsAtDebug(threshold, kinds))


# Per library logger, the exceptions it logs as errors with a traceback that a client
# causes, not the server:
# - aiohttp's HTTP server, every request its parser refuses (a line too long, broken
#   chunks), and again a body it could not decompress when it discards the rest after
#   the answer: the client already got a 400 for it.
# - grpc.aio's server, an answer (or a reflection or health message) it could not send
#   because the client went: it closed the connection while its call's answer waited
#   for flow-control room, as a client that never reads does. The call itself was
#   handled, logged and counted already. And a call cancelled before its handler task
#   first ran (``service.early_cancels``): the client gave up, or the stop cancelled it.
_CLIENT_ERRORS: dict[str, tuple[type[BaseException], ...]] = {
    "aiohttp.server": (BadHttpMessage, RequestPayloadError),
    "grpc._cython.cygrpc": (ExecuteBatchError, asyncio.CancelledError),
}


class _ClientErrorsAtDebug(logging.Filter):
    """Anyone could repeat what ``_CLIENT_ERRORS`` lists to flood the log and trip error
    alerts: those records are debug-level here, so shown only at ``--log-level debug``."""

    def __init__(self, threshold: int, kinds: tuple[type[BaseException], ...]) -> None:
        super().__init__()
        self._threshold = threshold
        self._kinds = kinds

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], self._kinds):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return self._threshold <= logging.DEBUG
        return True


def get_logger(name: str | None = None) -> FilteringBoundLogger:
    """A structlog logger; its events carry ``logger=name`` when a name is given.

    Safe to call at import time: the setup of the latest ``configure_logging``
    applies at each call.
    """
    logger = structlog.get_logger() if name is None else structlog.get_logger(name)
    return cast(FilteringBoundLogger, logger)


def bound_logger(name: str) -> FilteringBoundLogger:
    """A logger bound to the current setup once, for code that logs on every request.

    ``get_logger``'s lazy proxy builds a bound logger at every call; this one
    keeps the ``configure_logging`` in force when it is made (the stream is
    still looked up at each write).
    """
    return cast(FilteringBoundLogger, structlog.get_logger(name).bind())


def status_or_crash(run: Callable[[], int], log: FilteringBoundLogger, event: str) -> int:
    """``run()``'s exit status; for an exception it lets through, one error line ``event``
    with the ``exception`` (scrubbed as every line is) and 1.

    A server process's last resort (a single process's ``server crashed``, a worker's
    ``worker crashed``: docs/operations.md, "Log lines"): Python's own report is a
    plain traceback on stderr, which a JSON collector cannot parse, and which would
    show the exception's arguments (a token) unscrubbed.
    """
    try:
        return run()
    except BaseException:
        log.exception(event)
        # A worker ends with os._exit, which flushes nothing.
        sys.stderr.flush()
        return 1
