"""structlog setup: JSON lines in production, console in a terminal (design section 6).

One line per request (``request_log_fields``), and never a state token, a
seat token, a hand or a key: ``redact`` runs on every event, including the
stdlib ``logging`` records of libraries (grpc), which are rendered the same way.
Tracebacks never include local variables, which could hold any of those.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Mapping
from typing import Any, TextIO, cast

import structlog
from google.protobuf.message import Message
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, FilteringBoundLogger, Processor, WrappedLogger

#: Keys whose values must never reach a log line (design section 4 secrets, hidden cards).
REDACTED_KEYS: frozenset[str] = frozenset(
    {
        "state",
        "state_token",
        "state_tokens",
        "seat_token",
        "seat_tokens",
        "token",
        "tokens",
        "hand",
        "hands",
        "stock",
        "key",
        "keys",
        "state_key",
        "state_keys",
        "secret",
        "password",
    }
)
# Any key with one of these endings is treated as in REDACTED_KEYS too.
_REDACTED_SUFFIXES = ("_token", "_tokens", "_key", "_keys", "_hand", "_hands", "_secret")
REDACTED = "[REDACTED]"

LEVELS: Mapping[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}
FORMATS = ("auto", "json", "console")

_MAX_DEPTH = 8
# Values that cannot hide bytes or a nested secret key: the fast path of ``redact``.
_PLAIN: frozenset[type] = frozenset({str, int, float, bool, type(None)})


@functools.lru_cache(maxsize=4096)
def _secret_key(key: object) -> bool:
    if not isinstance(key, str):
        return False
    lowered = key.lower()
    return lowered in REDACTED_KEYS or lowered.endswith(_REDACTED_SUFFIXES)


def _scrub(value: object, depth: int = 0) -> object:
    """``value`` with secrets replaced: bytes (tokens are bytes), protobuf messages, secret keys."""
    if isinstance(value, bytes | bytearray | memoryview):
        return f"{REDACTED} {len(value)} bytes"
    if isinstance(value, Message):
        return f"{REDACTED} {type(value).__name__}"
    if depth >= _MAX_DEPTH:
        return value
    if isinstance(value, Mapping):
        return {k: REDACTED if _secret_key(k) else _scrub(v, depth + 1) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_scrub(v, depth + 1) for v in value)
    if isinstance(value, list | set | frozenset):
        return [_scrub(v, depth + 1) for v in value]
    return value


def redact(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: no secret ever leaves, whatever the caller passed."""
    for key in list(event_dict):
        if _secret_key(key):
            event_dict[key] = REDACTED
        elif type(event_dict[key]) not in _PLAIN:
            event_dict[key] = _scrub(event_dict[key])
    return event_dict


_LEADING_KEYS = ("timestamp", "level", "event")


def _leading_keys_first(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Put ``timestamp``, ``level``, ``event`` first, so JSON lines read well in a terminal too."""
    ordered = {k: event_dict[k] for k in _LEADING_KEYS if k in event_dict}
    ordered.update(event_dict)
    return ordered


def request_log_fields(
    *,
    request_id: str,
    method: str,
    code: str,
    duration_ms: float,
    game_id: str | None,
    transport: str,
    peer: str | None = None,
) -> dict[str, object]:
    """The fields of the one line logged per request (design section 6).

    ``game_id`` is always present (``null`` before a game exists); ``peer`` only
    when known. Log it as ``log.info("request", **request_log_fields(...))``.
    """
    fields: dict[str, object] = {
        "request_id": request_id,
        "method": method,
        "code": code,
        "duration_ms": round(duration_ms, 3),
        "game_id": game_id,
        "transport": transport,
    }
    if peer is not None:
        fields["peer"] = peer
    return fields


class _NamedPrintLogger(structlog.PrintLogger):
    """Prints to the current ``sys.stdout`` (structlog's default is the one seen at its import)."""

    def __init__(self, name: str | None) -> None:
        super().__init__(sys.stdout)
        self.name = name

    def msg(self, message: str) -> None:
        """One ``write`` per line: workers share stdout, and ``print`` writes the newline
        separately, so two unbuffered workers could interleave their lines."""
        stream = sys.stdout
        stream.write(message + "\n")
        stream.flush()

    log = debug = info = warn = warning = err = error = critical = exception = fatal = msg


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


def _use_console(fmt: str) -> bool:
    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {FORMATS}, not {fmt!r}")
    if fmt == "auto":
        return sys.stdout.isatty()
    return fmt == "console"


def configure_logging(fmt: str = "auto", level: str = "info") -> None:
    """Set up structlog and the stdlib root logger; calling it again replaces the setup.

    ``fmt``: ``json`` (one object per line on stdout: ``timestamp`` ISO 8601 UTC,
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
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Processor
    if console:
        # plain_traceback: the rich formatter, if rich were installed, shows locals.
        renderer = structlog.dev.ConsoleRenderer(
            colors=sys.stdout.isatty(), exception_formatter=structlog.dev.plain_traceback
        )
        tail: list[Processor] = [structlog.processors.StackInfoRenderer(), redact]
    else:
        renderer = structlog.processors.JSONRenderer()
        tail = [
            structlog.processors.StackInfoRenderer(),
            # show_locals defaults to True: a frame's locals may hold a token or a hand.
            structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False)),
            redact,
            _leading_keys_first,
        ]

    structlog.configure(
        processors=[*shared, *tail, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=_logger_factory,
        # Not cached, so a later configure_logging (and sys.stdout) applies to existing loggers.
        cache_logger_on_first_use=False,
    )

    # Library records (grpc, asyncio) through the same processors and renderer.
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            *shared,
            structlog.stdlib.ExtraAdder(),
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


def get_logger(name: str | None = None) -> FilteringBoundLogger:
    """A structlog logger; its events carry ``logger=name`` when a name is given.

    Safe to call at import time: the setup of the latest ``configure_logging``
    applies at each call.
    """
    logger = structlog.get_logger() if name is None else structlog.get_logger(name)
    return cast(FilteringBoundLogger, logger)
