"""What keeps secrets out of log lines (design sections 4 and 6): the structlog
processors that replace state tokens, seat tokens, hands, the stock and keys, wherever
they appear in an event, and the exceptions whose text could quote one."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from enum import Enum
from types import ModuleType
from typing import cast
from uuid import UUID

from google.protobuf.message import Message
from structlog.typing import EventDict, WrappedLogger

from service.config import hide_keys

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

_MAX_DEPTH = 8
# Values that cannot hide bytes or a nested secret key: the fast path of ``redact``.
_PLAIN: frozenset[type] = frozenset({str, int, float, bool, type(None)})


# Where a camelCase name (``seatToken``, the HTTP API's spelling) has its word breaks.
_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@functools.lru_cache(maxsize=4096)
def secret_key(key: object) -> bool:
    if not isinstance(key, str):
        return False
    lowered = _CAMEL_HUMP.sub("_", key).lower()
    return lowered in REDACTED_KEYS or lowered.endswith(_REDACTED_SUFFIXES)


# Top-level keys already found not secret: a set lookup is cheaper than a call to
# ``secret_key`` on every key of every line. Bounded, as the lru_cache is.
_PUBLIC_KEYS: set[object] = {
    "timestamp",
    "level",
    "event",
    "logger",
    "request_id",
    "method",
    "code",
    "duration_ms",
    "game_id",
    "transport",
    "peer",
    "reason",
}
_MAX_PUBLIC_KEYS = 4096


def _scrub(value: object, depth: int = 0) -> object:
    """``value`` with secrets replaced: bytes (tokens are bytes), protobuf messages, secret keys.

    Containers are looked through whatever their type (a deque, a protobuf repeated
    field), and a dataclass is written as the mapping of its fields: their ``repr``
    would show the bytes inside. Any other object is ``_scrubbed_object``.
    """
    if type(value) in _PLAIN:
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return f"{REDACTED} {len(value)} bytes"
    if isinstance(value, Message):
        return f"{REDACTED} {type(value).__name__}"
    if depth >= _MAX_DEPTH:
        # Too deep to look through, so it may hide a secret: shown as its type only.
        return _NotLookedThrough(f"{REDACTED} {type(value).__name__} nested too deep")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {
            _scrub(k) if isinstance(k, bytes) else k: (
                REDACTED if secret_key(k) else _scrub(v, depth + 1)
            )
            for k, v in value.items()
        }
    if isinstance(value, tuple):
        return tuple(_scrub(v, depth + 1) for v in value)
    # Not iterators: a file or an endless generator must not be read here (a generator's
    # repr shows nothing it holds).
    if isinstance(value, Iterable) and not isinstance(value, str | Iterator):
        return [_scrub(v, depth + 1) for v in value]
    return _scrubbed_object(value, depth)


class _NotLookedThrough(str):
    """``_scrub``'s word for a value nested too deep to look through: not a secret found,
    but what it stands in may hold one (``_scrubbed_object``)."""

    __slots__ = ()


def _holds(scrubbed: object, kind: Callable[[str], bool]) -> bool:
    """Whether ``scrubbed`` (what ``_scrub`` made) holds a text of ``kind``."""
    if isinstance(scrubbed, str):
        return kind(scrubbed)
    if isinstance(scrubbed, dict):
        return any(_holds(key, kind) or _holds(item, kind) for key, item in scrubbed.items())
    if isinstance(scrubbed, list | tuple):
        return any(_holds(item, kind) for item in scrubbed)
    return False


def _a_secret(text: str) -> bool:
    return REDACTED in text and not isinstance(text, _NotLookedThrough)


def _too_deep(text: str) -> bool:
    return isinstance(text, _NotLookedThrough)


# Shown as they are: values (a str or an int of a subclass too), and what orjson writes
# as a value itself (an enum's value, a UUID's text).
_VALUES = (str, int, float, Enum, UUID, type(None))


def _scrubbed_object(value: object, depth: int) -> object:
    """An object of no kind ``_scrub`` knows, as it may be shown (design section 4).

    The mapping of its attributes (``__dict__`` and ``__slots__``), as a dataclass is,
    when one of them is a secret or holds one (``argparse.Namespace(state_keys=KEY)``);
    its type alone when none was found but some of it nested too deep to look through;
    else its ``repr``, which the renderer would write, with each state key in it hidden
    (``config.hide_keys``): a key under no secret name (``Namespace(host=KEY)``, an
    exception's message) is known by its look alone. An exception is shown by its
    arguments scrubbed where they hold a secret. An object that says how it is shown
    (structlog's ``__structlog__``) is left to say so."""
    if isinstance(value, _VALUES) or hasattr(type(value), "__structlog__"):
        return value
    if isinstance(value, BaseException):
        return _arguments_scrubbed(value, depth + 1) or hide_keys(repr(value))
    attributes = _attributes(value)
    if attributes:
        scrubbed = _scrub(attributes, depth)
        if _holds(scrubbed, _a_secret):
            return scrubbed
        if _holds(scrubbed, _too_deep):
            # Its repr would show what lies deeper than was looked through (a Namespace's
            # request eight lists down, seat token and all), and its mapping could be
            # huge (a Logger's, with its manager and parents: 154,142 characters).
            return _NotLookedThrough(f"{REDACTED} {type(value).__name__} nested too deep")
    return hide_keys(repr(value))


def _attributes(value: object) -> dict[str, object]:
    """An instance's attributes, of its ``__dict__`` and its ``__slots__``; none of a class
    or a module, whose names are its code's, not data it was given."""
    if isinstance(value, type | ModuleType):
        return {}
    own = getattr(value, "__dict__", None)
    found: dict[str, object] = dict(own) if isinstance(own, dict) else {}
    for kind in type(value).__mro__:
        slots = kind.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in found or name in ("__dict__", "__weakref__"):
                continue
            # A slot named __x is stored under the mangled name.
            private = name.startswith("__") and not name.endswith("__")
            stored = f"_{kind.__name__.lstrip('_')}{name}" if private else name
            with contextlib.suppress(AttributeError):
                found[name] = getattr(value, stored)
    return found


def redact(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: no secret ever leaves, whatever the caller passed."""
    # Replacing the value of an existing key while iterating is safe: the size never changes.
    for key, value in event_dict.items():
        if key in _PUBLIC_KEYS:
            if type(value) not in _PLAIN and key not in _UNSCRUBBED:
                event_dict[key] = _scrub(value)
        elif secret_key(key):
            event_dict[key] = REDACTED
        else:
            if len(_PUBLIC_KEYS) < _MAX_PUBLIC_KEYS:
                _PUBLIC_KEYS.add(key)
            if type(value) not in _PLAIN and key not in _UNSCRUBBED:
                event_dict[key] = _scrub(value)
    return event_dict


# The console renderer's exception, as ``withhold_secret_arguments`` left it: the
# renderer needs the exception itself, not its text (``_scrubbed_object``), or it
# would fall back to ``sys.exc_info()``, the exception as raised.
_EXC_INFO = "exc_info"
# A library's log record, which structlog's ProcessorFormatter keeps in the event for
# its processors, and drops before rendering (``remove_processors_meta``): never
# written, so looking through it (13 µs of a library line's 25) was wasted.
_RECORD = "_record"
_UNSCRUBBED = (_EXC_INFO, _RECORD)


class MessageWithheldError(Exception):
    """Stands in for the exception of a library log record whose text may quote the request."""


# Loggers whose exceptions quote raw request bytes: aiohttp's parser errors put the
# malformed chunk or header in the message, and a body holds tokens.
_REQUEST_ECHOING_LOGGERS = ("aiohttp.",)


def withhold_request_text(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Keep the type and frames of such a record's exception, not its message."""
    name = event_dict.get("logger")
    exc_info = event_dict.get("exc_info")
    if (
        isinstance(name, str)
        and name.startswith(_REQUEST_ECHOING_LOGGERS)
        and isinstance(exc_info, tuple)
        and exc_info[0] is not None
    ):
        kind, _message, trace = exc_info
        withheld = MessageWithheldError(
            f"{kind.__name__}: message withheld, it may quote the request"
        )
        event_dict["exc_info"] = (kind, withheld, trace)
    return event_dict


class SecretWithheldError(Exception):
    """Stands in for an exception whose arguments hold bytes or a protobuf message."""


#: Exceptions followed down a chain of causes and groups at most; the rest is cut.
_MAX_CHAIN = 64


def _without_secrets(
    error: BaseException, seen: dict[int, BaseException | None], depth: int = 0
) -> BaseException | None:
    """``error`` itself, or when its arguments, or an exception it came from or groups,
    hold a secret a copy that says what it was with the secret hidden, traceback kept.
    None where the chain loops back or runs past ``_MAX_CHAIN``: it is cut there, so that
    no exception is shown that was not looked through.

    An exception's text is its arguments: ``KeyError(token)`` would quote the token. As a
    backstop its text is passed through ``config.hide_keys`` too: a message made of a key
    (``ValueError(f"bad key {key}")``) holds it as text, which only its look gives away.
    """
    if id(error) in seen:
        return seen[id(error)]  # None while it is still being looked through: a loop
    if depth >= _MAX_CHAIN:
        return None
    seen[id(error)] = None
    cause = _chained(error.__cause__, seen, depth)
    context = _chained(error.__context__, seen, depth)
    substitute = error
    if isinstance(error, BaseExceptionGroup):
        members = [
            _chained(member, seen, depth) or _not_shown(member) for member in error.exceptions
        ]
        # A copy as a group, also when only what it came from held a secret: a copy of
        # another kind would be logged without its members.
        if (
            cause is not error.__cause__
            or context is not error.__context__
            or any(new is not old for new, old in zip(members, error.exceptions, strict=True))
        ):
            substitute = error.derive(members)
    else:
        if (scrubbed := _arguments_scrubbed(error)) is not None:
            # Named as its own type: as the cause of another, the log's exc_type is the
            # copy's class name, which a search by type looks for.
            substitute = _withheld_as(type(error))(scrubbed)
        elif (hidden := _keys_hidden(error)) is not None:
            # Its message, as every exception's exc_value is, under its own type's name.
            substitute = _withheld_as(type(error))(hidden)
    if substitute is error and cause is error.__cause__ and context is error.__context__:
        seen[id(error)] = error
        return error
    if substitute is error:
        # Only what it came from held a secret: its own message, under its own type's
        # name, as a copy that hides a key is (exc_value is the message, not the type too).
        text = _text(error)
        substitute = _withheld_as(type(error))(_UNREADABLE if text is None else text)
    substitute.__cause__, substitute.__context__ = cause, context
    substitute.__suppress_context__ = error.__suppress_context__
    substitute.__traceback__ = error.__traceback__
    # What the code that raised it added (``add_note``), which the line's exc_notes shows.
    notes = getattr(error, "__notes__", None)
    if isinstance(notes, list):
        substitute.__notes__ = [hide_keys(str(note)) for note in notes]
    seen[id(error)] = substitute
    return substitute


def _arguments_scrubbed(error: BaseException, depth: int = 0) -> str | None:
    """``Type(arguments)`` of ``error``, its arguments scrubbed and each state key hidden,
    or None when no argument held a secret: what ``_scrub`` hides it marks REDACTED, and
    only then is the exception not shown as it is."""
    shown = ", ".join(map(repr, cast(tuple[object, ...], _scrub(error.args, depth))))
    return f"{type(error).__name__}({hide_keys(shown)})" if REDACTED in shown else None


def _withheld_as(kind: type[BaseException]) -> type[SecretWithheldError]:
    """A ``SecretWithheldError`` named as ``kind``: the log's ``exc_type`` of an exception
    that caused another is its class's name, which the copy keeps. Made anew each time:
    such a message is rare, and a cache would keep the classes."""
    names = {"__module__": kind.__module__, "__qualname__": kind.__qualname__}
    return cast(type[SecretWithheldError], type(kind.__name__, (SecretWithheldError,), names))


def _keys_hidden(error: BaseException) -> str | None:
    """``error``'s text with each state key hidden, or None when it shows none (or cannot
    be read)."""
    text = _text(error)
    if text is None:
        return None
    hidden = hide_keys(text)
    return None if hidden == text else hidden


# What Python's traceback writes for an exception whose ``__str__`` fails.
_UNREADABLE = "<exception str() failed>"


def _text(error: BaseException) -> str | None:
    """``error``'s text, or None when its ``__str__`` fails: a bug's exception may be
    broken too, and the line that logs it must still be written, not raise instead."""
    try:
        return str(error)
    except Exception:
        return None


def _chained(
    error: BaseException | None, seen: dict[int, BaseException | None], depth: int
) -> BaseException | None:
    return None if error is None else _without_secrets(error, seen, depth + 1)


def _not_shown(error: BaseException) -> SecretWithheldError:
    return SecretWithheldError(f"{type(error).__name__}: not shown (a loop, or too deep)")


def withhold_secret_arguments(
    _logger: WrappedLogger, _method: str, event_dict: EventDict
) -> EventDict:
    """Render a logged exception without the secrets its arguments hold (design section 6):
    ``redact`` sees only the text it is rendered to."""
    exc_info = event_dict.get("exc_info")
    if not exc_info:
        return event_dict
    if isinstance(exc_info, BaseException):
        exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
    elif not isinstance(exc_info, tuple):
        exc_info = sys.exc_info()
    kind, error, trace = exc_info
    if error is not None:
        shown = _without_secrets(error, {}) or _not_shown(error)
        event_dict["exc_info"] = (kind, shown, trace)
    return event_dict
