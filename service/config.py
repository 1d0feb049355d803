"""Server configuration from flags and ``CARDRULES_*`` environment variables (design section 6).

A flag wins over its environment variable, which wins over the embedded
default. The defaults run a one-machine server: gRPC on 50051, HTTP/JSON on
8080, metrics on 9464, one worker, an ephemeral state key, no CORS origins.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import itertools
import os
import re
import select
import socket
import stat
import stringprep
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, BinaryIO

from service.http_cors import parse_origins
from service.spelling import nearest
from service.tokens import KeyRing
from service.whole_numbers import NumberTooLongError, parse_whole_number

ENV_PREFIX = "CARDRULES_"
#: prometheus_client's multiprocess folder, which workers share (``service.metrics``).
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: Its deprecated name, which prometheus_client still reads.
DEPRECATED_MULTIPROC_ENV = "prometheus_multiproc_dir"
#: The names of prometheus_client's files of values in that folder (its ``values.py``):
#: the server deletes these of an earlier run, and no other file.
MULTIPROC_VALUE_FILE = re.compile(r"(?:counter|histogram|summary|gauge_[a-z]+)_[^/]+\.db")
LOG_FORMATS = ("auto", "json", "console")
LOG_LEVELS = ("debug", "info", "warning", "error")
MIN_CONNECTION_AGE_SECONDS = 1
#: How long a gRPC connection with no call open is kept (``--max-connection-idle-seconds``):
#: grpc core keeps one for ever, and each holds a file descriptor and about 15 KB (a
#: review: 10,000 idle connections from one address, 10,000 descriptors and +145 MiB).
#: Five minutes outlast any pause between a game's calls; a client whose connection
#: was closed reconnects at its next call.
CONNECTION_IDLE_SECONDS = 300.0
#: Under a second a client pausing between calls would reconnect for nothing; over a
#: day an idle connection is one left behind (0 keeps them for ever, as grpc does).
MIN_CONNECTION_IDLE_SECONDS = 1
MAX_CONNECTION_IDLE_SECONDS = 24 * 3600
#: How long the HTTP gateway keeps an idle connection open by default
#: (``--http-keepalive-seconds``): longer than the 60 s idle timeout of common load
#: balancers (AWS ALB, ingress-nginx's upstream keepalive), so that they, not the server,
#: close a pooled connection and no request meets a closing socket. Proxies that keep
#: theirs longer (Google's load balancers 600 s, Envoy and Istio an hour) need it raised,
#: or their own lowered: docs/api.md's keep-alive paragraph.
HTTP_KEEPALIVE_SECONDS = 75.0
#: The same timer bounds how long a new connection may take to send its whole request
#: head (aiohttp runs it from the connection's start): under a second a slow client's
#: first head would not arrive in time, and over two hours a client trickling its
#: headers could hold a connection that long. Two hours outlast Envoy's one-hour
#: default idle timeout.
MIN_HTTP_KEEPALIVE_SECONDS = 1
MAX_HTTP_KEEPALIVE_SECONDS = 2 * 3600
MIN_WORKER_TIMEOUT_SECONDS = 2
#: A keys file holds a few keys of 44 characters; a larger file is refused unread.
MAX_KEYS_FILE_BYTES = 64 * 1024
#: How long a keys file that is no regular file (a pipe, a character device) may take
#: to give all its keys and end: the start-up waits no longer, and is refused.
KEYS_PIPE_SECONDS = 10.0
#: How often that wait looks whether a stop signal came (``resolve``'s ``stopped``).
_STOP_CHECK_SECONDS = 0.05
#: What ``hide_keys`` puts in a message in place of a state key.
KEY_NOT_SHOWN = "[a state key, not shown]"
# A word of either base64 alphabet as long as a key cut short to ``_MIN_KEY_PREFIX``
# letters, or longer: what ``hide_keys`` tries as a state key.
_KEY_LIKE = re.compile(r"[A-Za-z0-9+/_-]{40,}={0,2}")
# A byte that is no UTF-8 as Python reads the command line and the environment
# (surrogateescape): 0x80 to 0xff as U+DC80 to U+DCFF.
_SURROGATE = re.compile(r"[\udc80-\udcff]")
# ``repr``'s escape of one, or an escaped backslash: read from the left, a backslash
# that ``repr`` escaped is never taken for the start of an escape.
_SURROGATE_ESCAPE = re.compile(r"\\\\|\\udc[89a-f][0-9a-f]")
# The lengths of one state key's text: 43 characters unpadded, 44 with its "=" (45
# with a stray second one).
_KEY_TEXT_LENGTHS = (43, 44, 45)
# The letters of a key's 43 (256 bits) that still make it one when it is cut short: the
# 16 bits or fewer that the rest holds are guessed at once by anyone who holds a state
# token it sealed. Shorter runs are shown: too many ordinary words are that long.
_MIN_KEY_PREFIX = 40
# The longest word hidden for looking drawn at random: a key with up to 5 letters glued
# to it (``x$KEY``, ``KEY_old``). A longer word, such as a path, is hidden only where it
# holds a whole key.
_MAX_GLUED_KEY = 48
# What a word of 40 to 48 letters holds to look drawn at random (``hide_keys``): each
# kind of letter, and fewer pairs of lower-case letters side by side than 9 in 20 of
# its letters. Words of a language are made of such pairs (``/home/Alice2/cardrules``:
# 14 in 22 letters); a key's 40 letters hold about 6, 18 or more in one key in 1,400.
_MIN_UPPER = 6
_MIN_LOWER = 6
_MIN_DIGITS = 1
_LOWER_PAIRS_PER = (9, 20)
_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_DIGITS = frozenset("0123456789")
#: The most characters of a value a refusal quotes (``_shown``), and of a path, method or
#: header the HTTP gateway echoes (``service.http_gateway``). A setting given 100,000
#: characters was quoted whole, a refusal of 100 KB on one line that a log shipper cuts
#: or drops; a longer value is cut, and its length said.
ECHOED_CHARS = 120
#: What ends a value cut short, inside its quotes (as ``service.http_json``'s "...").
CUT_MARK = "\u2026"
# The longest host name DNS carries (RFC 1035: 255 bytes on the wire, 253 written out,
# its final dot aside): a longer one can name nothing, and was echoed whole in the
# "cannot listen" error.
_MAX_HOST_NAME = 253
# What follows the backslash of an escape ``repr`` writes (``\n``, ``\t``, ``\x0b``,
# ``\u2028``): in a quoted value it is glued to a key that followed the character.
_ESCAPE_LETTERS = re.compile(r"[nrt]|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}")


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything the server reads at start-up."""

    host: str = "0.0.0.0"
    grpc_port: int = 50051
    http_port: int = 8080
    metrics_port: int = 9464
    workers: int = 1
    # Never in a repr: a config printed or logged by mistake must not carry the keys.
    state_keys: str | None = field(default=None, repr=False)
    plain_state: bool = False
    refuse_chosen_deals: bool = False
    log_format: str = "auto"
    log_level: str = "info"
    max_request_bytes: int = 64 * 1024
    grace_seconds: float = 10.0
    drain_delay_seconds: float = 1.0
    max_connection_age_seconds: float = 0.0
    max_connection_idle_seconds: float = CONNECTION_IDLE_SECONDS
    http_keepalive_seconds: float = HTTP_KEEPALIVE_SECONDS
    worker_timeout_seconds: float = 10.0
    cors_origins: tuple[str, ...] = ()
    # ``state_keys`` came from ``--state-keys``: the start-up warning about keys that every
    # user of the machine can read in the command line.
    keys_on_command_line: bool = False
    # The file the keys came from: the start-up warning about one others may write.
    keys_file: KeysFile | None = None


@dataclass(frozen=True, slots=True)
class KeysFile:
    """The state keys file as the server found it: the setting that named it, its path and
    its permission bits (``stat.S_IMODE``)."""

    setting: str
    path: str
    mode: int


# flag name -> (ServerConfig field, help). The env var is CARDRULES_ + FIELD upper-cased.
_OPTIONS: dict[str, tuple[str, str]] = {
    "--host": ("host", "address to listen on"),
    "--grpc-port": ("grpc_port", "gRPC port (0 = any free port)"),
    "--http-port": ("http_port", "HTTP/JSON gateway port (0 = any free port)"),
    "--metrics-port": ("metrics_port", "Prometheus metrics port (0 = off)"),
    "--workers": (
        "workers",
        "worker processes sharing the ports (more than one per core gains nothing); 2 or "
        "more need fixed gRPC and HTTP ports, and Linux",
    ),
    "--state-keys": (
        "state_keys",
        "base64 AES-256 keys separated by commas or white space; the first seals, all open",
    ),
    "--state-keys-file": (
        "state_keys_file",
        "file holding the state keys, one per line; # starts a comment",
    ),
    "--plain-state": (
        "plain_state",
        "DEBUGGING ONLY: unsealed state tokens (the flag takes no value; "
        "--no-plain-state seals whatever the variable says)",
    ),
    "--refuse-chosen-deals": (
        "refuse_chosen_deals",
        "refuse a NewGame that chooses its cards (seed, decks or draw) with "
        "CHOSEN_DEAL_REFUSED, for servers that player-facing callers reach (the flag takes "
        "no value; --no-refuse-chosen-deals allows them whatever the variable says)",
    ),
    "--log-format": ("log_format", "json, console, or auto (console on a terminal)"),
    "--log-level": ("log_level", "debug, info, warning or error"),
    "--max-request-bytes": (
        "max_request_bytes",
        "largest request accepted; the longest matches' state tokens reach 15 to 22 KB "
        "(at most about 34 KB), which a lower limit refuses part-way",
    ),
    "--drain-delay-seconds": (
        "drain_delay_seconds",
        "how long SIGTERM keeps serving after readiness turns NOT_SERVING, so that "
        "health-checking clients move away first (0 = stop at once; SIGINT skips it)",
    ),
    "--grace-seconds": (
        "grace_seconds",
        "how long the stop after the drain delay waits for in-flight requests",
    ),
    "--max-connection-age-seconds": (
        "max_connection_age_seconds",
        "close each gRPC connection after about this long (GOAWAY, calls in flight "
        "finish), so that clients reconnect, re-resolve DNS and find new pods (0 = never; "
        "else at least 1)",
    ),
    "--max-connection-idle-seconds": (
        "max_connection_idle_seconds",
        "close a gRPC connection that has had no call open this long, or up to twice that "
        "(grpc checks once a period; GOAWAY: its client reconnects at its next call), so "
        "that idle connections do not pile up (0 = never; else at least 1)",
    ),
    "--http-keepalive-seconds": (
        "http_keepalive_seconds",
        "close an HTTP connection that has sent no whole request head this long after it "
        "opened or after its last answer (idle, or trickling its headers); keep it longer "
        "than the idle timeout of a load balancer or proxy in front (620 behind Google's "
        "load balancers)",
    ),
    "--worker-timeout-seconds": (
        "worker_timeout_seconds",
        "with --workers 2 or more: kill a worker whose event loop has not run for this "
        "long, then stop the others and exit 1 so that the server restarts (0 = never; "
        "else at least 2)",
    ),
    "--cors-origins": (
        "cors_origins",
        "browser origins allowed to call the HTTP gateway, separated by commas or white "
        "space, e.g. https://play.example.com (* allows any)",
    ),
}


# What an unset option means where the ServerConfig default does not say it.
_DEFAULT_TEXTS = {
    "state_keys": "an ephemeral key, with a warning",
    "state_keys_file": "none",
    "plain_state": "off",
    "refuse_chosen_deals": "off",
    "cors_origins": "none",
}
_CONFIG_DEFAULTS = {f.name: f.default for f in fields(ServerConfig)}


@dataclass(frozen=True, slots=True)
class OptionDoc:
    """One serve option as ``--help`` and docs/operations.md show it."""

    flag: str
    field: str
    variable: str
    default: str
    text: str


def env_name(field_name: str) -> str:
    return ENV_PREFIX + field_name.upper()


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """The ``CARDRULES_*`` variables no setting reads, by name: a misspelt one (say
    ``CARDRULES_STATE_KEY``, or ``cardrules_grpc_port`` in lower case) would otherwise
    leave its setting at the default unnoticed."""
    env = os.environ if environ is None else environ
    known = {env_name(name) for name, _ in _OPTIONS.values()}
    # In any case: environment names are case-sensitive, and cardrules_grpc_port set
    # nothing, unnamed.
    return sorted(name for name in env if name.upper().startswith(ENV_PREFIX) and name not in known)


def variable_slips(unknown: Sequence[str]) -> list[tuple[str, str]]:
    """``(variable, meant)`` for each unknown variable a slip from a setting's
    (``CARDRULES_GRPC_PORTS``, ``cardrules_grpc_port``), ``meant`` that setting's."""
    known = [env_name(name) for name, _ in _OPTIONS.values()]
    return [(name, near) for name in unknown if (near := nearest(name, known))]


def meant_variables(unknown: Sequence[str]) -> list[str]:
    """``variable_slips`` as ``"CARDRULES_GRPC_PORT for CARDRULES_GRPC_PORTS"``."""
    return [f"{near} for {name}" for name, near in variable_slips(unknown)]


def _default_text(name: str) -> str:
    if name in _DEFAULT_TEXTS:
        return _DEFAULT_TEXTS[name]
    value = _CONFIG_DEFAULTS[name]
    return f"{value:g}" if isinstance(value, float) else str(value)


def server_options() -> list[OptionDoc]:
    """Every serve option with its variable and embedded default, in ``--help`` order."""
    return [
        OptionDoc(flag, name, env_name(name), _default_text(name), text)
        for flag, (name, text) in _OPTIONS.items()
    ]


def add_server_arguments(
    parser: argparse.ArgumentParser, only: Sequence[str] | None = None
) -> None:
    """The serve flags; their defaults come from the environment at parse time.

    With ``only``, the flags of those fields alone, and no defaults in their help, which
    are serve's: ``keyid`` takes the keys' flags, and has no ephemeral key."""
    for option in server_options():
        if only is not None and option.field not in only:
            continue
        default = "" if only is not None else f" (default: {option.default})"
        text = f"{option.text}{default} [{option.variable}]"
        if option.field in _BOOLEANS:
            # --no-plain-state too: every other variable can be overridden by its flag.
            parser.add_argument(
                option.flag, action=argparse.BooleanOptionalAction, default=None, help=text
            )
        else:
            action = _ListGivenOnce if option.field in _LISTS else "store"
            parser.add_argument(
                option.flag, dest=option.field, default=None, action=action, help=text
            )


#: The settings that are on or off: a flag without a value and its ``--no-`` form.
_BOOLEANS = ("plain_state", "refuse_chosen_deals")
#: The settings that take a list in one value, and what the list holds.
_LISTS = {"state_keys": "key", "cors_origins": "origin"}


class _ListGivenOnce(argparse.Action):
    """A list flag given a second time is refused: argparse kept only the last, so
    ``--state-keys NEW --state-keys OLD`` started a server with OLD alone. Any other
    flag given again overrides, as a command line's last word does."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        if getattr(namespace, self.dest) is not None:
            item = _LISTS[self.dest]
            parser.error(
                f"{option_string} given twice: give every {item} in one value, separated by commas or "
                "white space"
            )
        setattr(namespace, self.dest, values)


class ConfigValueError(ValueError):
    """A flag or environment value that cannot be used; the message names it."""


class StartStoppedError(Exception):
    """A stop signal came while the keys file's pipe was still being waited for
    (``resolve``'s ``stopped``): the start-up ends there, as asked. The message says
    what was being read."""


def _int(source: str, text: str, low: int, high: int) -> int:
    """A whole number from ``low`` to ``high``, in ASCII digits (``service.whole_numbers``)."""
    try:
        value = parse_whole_number(text)
    except NumberTooLongError as error:
        raise ConfigValueError(f"{source}: must be {low} to {high}, not {error.shown}") from None
    except ValueError:
        raise ConfigValueError(
            f"{source}: must be a whole number from {low} to {high}, not {quoted(text)}"
        ) from None
    if not low <= value <= high:
        raise ConfigValueError(f"{source}: must be {low} to {high}, not {value}")
    return value


# ASCII decimal, as for the ports: float() also takes "1_0" and full-width digits.
_DECIMAL = re.compile(r"\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\s*", re.ASCII)


def _seconds(
    source: str, text: str, high: int = 3600, minimum: int = 0, *, never: bool = True
) -> float:
    """Seconds from 0 to ``high``; with a ``minimum``, 0 (never) or from it to ``high``,
    or from it alone where 0 means nothing (``never=False``).

    The refusals word the range as every other setting's does (``must be 0 to 3600
    seconds, not 1e9``), quoting the value as it was given."""
    zero = minimum > 0 and never
    never_text = "0 (never) or " if zero else ""
    if not _DECIMAL.fullmatch(text):
        raise ConfigValueError(
            f"{source}: must be {never_text}a number of seconds from {minimum} to {high}, "
            f"not {quoted(text)}"
        )
    value = float(text)
    if not (0 <= value <= high and (value >= minimum or (zero and value == 0))):
        raise ConfigValueError(
            f"{source}: must be {never_text}{minimum} to {high} seconds, "
            f"not {unquoted(text.strip())}"
        )
    return value


def _host(source: str, text: str) -> str:
    """A host name or address; an IPv6 address may come in brackets (``[::1]``)."""
    host = text.strip()
    if _reads_as_keys(host):  # a Secret wired to this variable: never quoted, never logged
        raise ConfigValueError(
            f"{source}: {KEY_NOT_SHOWN} is not a host name or address: state keys go in "
            "CARDRULES_STATE_KEYS"
        )
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    name = ""
    if len(host.rstrip(".")) <= _MAX_HOST_NAME:  # the encoder's time grows with length
        with contextlib.suppress(UnicodeError):  # labels of 1 to 63 characters, encoded
            name = host.encode("idna").decode("ascii")
    if len((name or host).rstrip(".")) > _MAX_HOST_NAME:
        encoded = f", {len(name.rstrip('.'))} in its xn-- form" if name and name != host else ""
        raise ConfigValueError(
            f"{source}: {quoted(text)} is not a host name or address (a name is at most "
            f"{_MAX_HOST_NAME} characters{encoded})"
        )
    if not host or any(c.isspace() or c in "[]/" for c in host):
        raise ConfigValueError(f"{source}: {quoted(text)} is not a host name or address")
    if dropped := next((c for c in host if stringprep.in_table_b1(c)), None):
        # IDNA maps it to nothing: localhost\u00ad passed as localhost, and grpc then failed
        # to resolve it, blaming the port's setting.
        raise ConfigValueError(
            f"{source}: {quoted(text)} is not a host name or address (it holds U+{ord(dropped):04X}, "
            "which a name drops)"
        )
    if ":" in host:
        try:
            mapped = ipaddress.IPv6Address(host).ipv4_mapped
        except ValueError:
            raise ConfigValueError(
                f"{source}: {quoted(text)} is not a host name or address (the ports have "
                "flags of their own: --grpc-port, --http-port, --metrics-port)"
            ) from None
        if mapped is not None:  # grpc listened on it, aiohttp could not (EINVAL)
            raise ConfigValueError(
                f"{source}: {quoted(text)} is an IPv4 address in IPv6 form: give {mapped}"
            )
        return host
    # A name, or an IPv4 address: labels of 1 to 63 characters (IDNA), of letters,
    # digits and hyphens once encoded; all digits only as an IPv4 address.
    if not _HOST_NAME.fullmatch(name):
        raise ConfigValueError(f"{source}: {quoted(text)} is not a host name or address")
    four = _four_numbers(name)
    if four is not None and four != name:
        # 127.1, 0x7f.1: Python's resolver takes them, grpc's does not ("Failed to bind").
        raise ConfigValueError(
            f"{source}: {quoted(text)} is an IPv4 address in short form: give its four "
            f"numbers, {four}"
        )
    if four is None and _DOTTED_DIGITS.fullmatch(name):
        raise ConfigValueError(f"{source}: {quoted(text)} is not a host name or address")
    return host


_HOST_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?"
_HOST_NAME = re.compile(rf"{_HOST_LABEL}(?:\.{_HOST_LABEL})*\.?", re.ASCII)
_DOTTED_DIGITS = re.compile(r"[0-9.]+", re.ASCII)


def _opened_at_once(path: str) -> BinaryIO:
    """``path`` opened for reading without waiting, left non-blocking: a named pipe that
    nothing writes to held the start-up in ``open`` for ever, SIGTERM and Ctrl-C
    included (they are only recorded during start-up, and ``open`` is retried after
    them). Such a pipe reads as empty; one being written to, as process substitution's
    ``<(...)``, reads as it is written (``_read_waiting``)."""
    return open(path, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK))


def _read_waiting(fd: int, setting: str, path: str, stopped: Callable[[], bool] | None) -> bytes:
    """What the pipe or device ``fd`` (non-blocking) gives until it ends, at most one byte
    more than ``MAX_KEYS_FILE_BYTES``. A writer that holds the pipe open without
    writing, or without closing it (a secret fetch that hangs), held the start-up in
    ``read`` for ever, deaf to SIGTERM and Ctrl-C, which start-up only records: the
    wait ends after ``KEYS_PIPE_SECONDS`` with a refusal, or at once when ``stopped``
    says a stop signal came (``StartStoppedError``)."""
    deadline = time.monotonic() + KEYS_PIPE_SECONDS
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_KEYS_FILE_BYTES:
        try:
            chunk = os.read(fd, MAX_KEYS_FILE_BYTES + 1 - size)
        except BlockingIOError:
            chunk = None
        if chunk == b"":  # the end: every writer closed it (or none ever opened it)
            break
        if chunk:
            chunks.append(chunk)
            size += len(chunk)
            continue
        if stopped is not None and stopped():
            raise StartStoppedError(f"{setting}: {_shown_path(path)} had not given the keys yet")
        left = deadline - time.monotonic()
        if left <= 0:
            raise ConfigValueError(
                f"{setting}: {_shown_path(path)} is a pipe or device that did not give "
                f"the keys and end within {KEYS_PIPE_SECONDS:g} s: what writes the keys "
                "to it must write them all and close it"
            )
        # In short steps: a signal's handler runs inside poll, which Python then resumes.
        poller.poll(min(left, _STOP_CHECK_SECONDS) * 1000)
    return b"".join(chunks)


def _four_numbers(text: str) -> str | None:
    """The IPv4 address the C library reads ``text`` as, in any of its forms (``127.1``,
    ``0x7f.1``), written as its four numbers; None if it reads none. An address already
    in that form comes back as it was."""
    try:
        return socket.inet_ntoa(socket.inet_aton(text))
    except OSError:
        return None


def host_port(host: str, port: int) -> str:
    """``host:port``, with an IPv6 address in brackets (``[::1]:50051``)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _choice(source: str, text: str, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (all lower case), in any case: ``INFO`` is ``info``."""
    if (choice := text.strip().lower()) not in choices:
        raise ConfigValueError(f"{source}: must be one of {', '.join(choices)}, not {quoted(text)}")
    return choice


def _bool(source: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigValueError(
        f"{source}: must be true or false (true, false, 1, 0, yes, no, on or off), "
        f"not {quoted(text)}"
    )


def given_by(args: argparse.Namespace, name: str, environ: Mapping[str, str]) -> str | None:
    """Where the setting ``name`` is given: its flag, which wins, its variable, or nowhere."""
    if getattr(args, name, None) is not None:
        return "--" + name.replace("_", "-")
    return env_name(name) if env_name(name) in environ else None


def resolve(
    args: argparse.Namespace,
    environ: Mapping[str, str] | None = None,
    stopped: Callable[[], bool] | None = None,
) -> ServerConfig:
    """Combine parsed flags, the environment and the defaults into a checked config.

    ``stopped`` says whether a stop signal has come: a keys file that is a pipe is
    waited for only until then (``StartStoppedError``), as ``serve`` stops during
    start-up (docs/operations.md, "Termination")."""
    env = os.environ if environ is None else environ

    sources: dict[str, str] = {}

    def raw(name: str) -> tuple[str, str] | None:
        if (source := given_by(args, name, env)) is None:
            return None
        sources[name] = source
        flag_value = getattr(args, name, None)
        return source, str(flag_value) if flag_value is not None else env[source]

    def given(name: str) -> tuple[str, str] | None:
        """``raw``, refusing a value set but empty: usually one that went missing (a
        Secret, a templated manifest), and the server must not quietly run on the default."""
        if (item := raw(name)) is not None and not item[1].strip():
            raise ConfigValueError(
                f"{item[0]}: set but empty: give a value, or leave it out for the default"
            )
        return item

    def origin(name: str) -> str:
        """Where a value came from, for a message about two values together."""
        return sources.get(name, f"the default --{name.replace('_', '-')}")

    values: dict[str, Any] = {}
    if (item := given("host")) is not None:
        values["host"] = _host(*item)
    for name, low, high in (
        ("grpc_port", 0, 65535),
        ("http_port", 0, 65535),
        ("metrics_port", 0, 65535),
        ("workers", 1, 64),
        ("max_request_bytes", 1024, 64 * 1024 * 1024),
    ):
        if (item := given(name)) is not None:
            values[name] = _int(*item, low, high)
    for name in ("drain_delay_seconds", "grace_seconds"):
        if (item := given(name)) is not None:
            values[name] = _seconds(*item)
    if (item := given("max_connection_age_seconds")) is not None:
        # Under a second, clients would spend their time reconnecting: with 1 ms, a
        # third of the calls of four clients failed.
        values["max_connection_age_seconds"] = _seconds(
            *item, high=7 * 24 * 3600, minimum=MIN_CONNECTION_AGE_SECONDS
        )
    if (item := given("max_connection_idle_seconds")) is not None:
        values["max_connection_idle_seconds"] = _seconds(
            *item, high=MAX_CONNECTION_IDLE_SECONDS, minimum=MIN_CONNECTION_IDLE_SECONDS
        )
    if (item := given("http_keepalive_seconds")) is not None:
        # No 0: aiohttp would then never close an idle connection, nor one trickling
        # its request head.
        values["http_keepalive_seconds"] = _seconds(
            *item, high=MAX_HTTP_KEEPALIVE_SECONDS, minimum=MIN_HTTP_KEEPALIVE_SECONDS, never=False
        )
    if (item := given("worker_timeout_seconds")) is not None:
        # Workers beat every half second (service.watchdog): a shorter timeout would
        # kill a worker that only waited for a core.
        values["worker_timeout_seconds"] = _seconds(*item, minimum=MIN_WORKER_TIMEOUT_SECONDS)
    if (item := raw("cors_origins")) is not None:
        values["cors_origins"] = _origins(*item)
    if (item := given("log_format")) is not None:
        values["log_format"] = _choice(*item, LOG_FORMATS)
    if (item := given("log_level")) is not None:
        values["log_level"] = _choice(*item, LOG_LEVELS)
    for name in _BOOLEANS:
        # getattr: keyid's namespace holds the key settings alone.
        if (flag_value := getattr(args, name, None)) is not None:
            values[name] = flag_value
        elif (item := given(name)) is not None:
            values[name] = _bool(*item)
    keys = raw("state_keys")
    keys_file = raw("state_keys_file")
    if keys and keys_file:
        raise ConfigValueError(f"{keys[0]} and {keys_file[0]} exclude each other")
    if keys_file:
        values["state_keys"], values["keys_file"] = _read_keys_file(*keys_file, stopped)
    elif keys:
        values["state_keys"] = keys[1]
        values["keys_on_command_line"] = keys[0].startswith("--")  # not its variable
    if source := keys_file or keys:
        # Parsed here too, so that a bad key is reported like any other bad value,
        # naming where it came from (the message never quotes key text). Set but
        # empty is an error, not the ephemeral key: it is a Secret gone wrong.
        try:
            KeyRing.parse(values["state_keys"])
        except ValueError as error:
            raise ConfigValueError(f"{source[0]}: {error}") from None
    config = ServerConfig(**values)
    _check_ports(config, origin)
    return config


def _origins(source: str, text: str) -> tuple[str, ...]:
    """The origins of ``--cors-origins`` or its variable (``parse_origins``), the one
    refused quoted as every setting's value is (``quoted``: keys hidden, a long one cut
    short) and bytes that are no UTF-8 shown as ``\\xff``."""
    try:
        return parse_origins(text, quote=quoted)
    except ValueError as error:
        raise ConfigValueError(f"{source}: {bytes_shown(str(error))}") from None


def _read_keys_file(
    setting: str, given_path: str, stopped: Callable[[], bool] | None = None
) -> tuple[str, KeysFile]:
    """The state keys in the file that ``setting`` (``--state-keys-file`` or its
    variable) names, comments removed, and the file as found (``KeysFile``: its mode
    is for ``key_warnings``). Design section 4: a refusal names ``setting`` and never
    quotes the file's content, nor a path that reads as keys. A pipe or device is read
    for ``KEYS_PIPE_SECONDS`` at most, or until ``stopped`` (``_read_waiting``).
    """
    # Trimmed, as every other setting is: a Secret or .env written on Windows ends
    # the path with a CR, which the message would print raw.
    path = given_path.strip()
    if not path:
        raise ConfigValueError(f"{setting}: empty: give the path of the keys file")
    try:
        with _opened_at_once(path) as file:
            if stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                os.set_blocking(file.fileno(), True)
                content = file.read(MAX_KEYS_FILE_BYTES + 1)
            else:
                content = _read_waiting(file.fileno(), setting, path, stopped)
            # The file read, a symbolic link followed (a Kubernetes Secret's is).
            mode = stat.S_IMODE(os.fstat(file.fileno()).st_mode)
        if len(content) > MAX_KEYS_FILE_BYTES:
            # Not a keys file (a key is 44 characters): /dev/zero, a log, a disk image,
            # whose whole reading would hold the start-up for ever or fill the memory.
            raise ConfigValueError(
                f"{setting}: {_shown_path(path)} is larger than {MAX_KEYS_FILE_BYTES} "
                "bytes: expected base64 AES-256 keys, one per line"
            )
        # A comment runs from # to the end of its line (no base64 has a #): operators
        # note beside each key when it was made, as authorized_keys files allow.
        # Not ".*": it runs on over a lone CR, the line end of old Mac files.
        keys = re.sub(r"#[^\r\n]*", "", content.decode("utf-8-sig"))
    except OSError as error:
        if _reads_as_keys(path):
            # The keys where their file's path belongs (a Secret wired to this
            # variable): quoted, as the OSError quotes it too, they would reach the log.
            raise ConfigValueError(
                f"{setting}: cannot read the file it names ({error.strerror}), "
                "whose name is not shown: it reads as state keys, which go in "
                "CARDRULES_STATE_KEYS (this setting takes the path of a file of them)"
            ) from None
        raise ConfigValueError(
            f"{setting}: cannot read {_shown_path(path)}: {error.strerror or error}"
        ) from None
    except UnicodeDecodeError:
        # Its text would quote a byte of the file, and where: a raw key's.
        raise ConfigValueError(
            f"{setting}: {_shown_path(path)} is not text: expected base64 "
            "AES-256 keys, one per line (not raw key bytes)"
        ) from None
    return keys, KeysFile(setting, path, mode)


#: Permission bits that let users other than a file's owner write it.
_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def key_warnings(config: ServerConfig, keys: KeyRing) -> list[tuple[str, dict[str, str]]]:
    """The start-up warnings about the keys, each as (event, fields), never a key's text
    (docs/operations.md, "Configuration"): a key made by hand rather than drawn at random
    (``tokens.weakness``), named by its id, and a keys file that users other than its
    owner may write. Read access is no matter: Kubernetes mounts a Secret 0644, owned by
    root."""
    warnings = [
        (
            "weak state key: make keys with `cardrules keygen`",
            {"key_id": key_id, "why": why},
        )
        for key_id, why in keys.weak_keys()
    ]
    file = config.keys_file
    if file is not None and file.mode & _WRITABLE_BY_OTHERS:
        warnings.append(
            (
                "state keys file writable by users other than its owner: whoever can write "
                "it can put in a key of their own and forge game states (chmod go-w)",
                {"setting": file.setting, "path": file.path, "mode": f"{file.mode:04o}"},
            )
        )
    return warnings


def hide_keys(text: str) -> str:
    """``text`` with each word that reads as a state key replaced by ``KEY_NOT_SHOWN``: for
    messages that quote what was given, such as argparse's (design section 4).

    What reads as a key is hidden: a word, or a part of one from its start or a ``/`` to
    its end or a ``/``, of a key's length (43 letters, with up to 2 ``=``), whatever its
    letters; so a path loses such a part of its own. A message that quoted a value with
    ``repr`` wrote the new line or tab before a key as ``\\n`` or ``\\t``, glued to it:
    such a word is tried without the escape too.

    A word of 40 to 48 letters (before its ``=`` padding, after an escape's letters) is
    hidden whole too when it looks drawn at random: at least 6 upper-case letters, 6
    lower-case ones and a digit, and fewer pairs of lower-case letters side by side than
    9 in 20 of its letters. So a key with up to 5 letters glued to it (``x$KEY``,
    ``KEY_old``), or cut short to 40, 41 or 42 of its 43 (``${KEY:0:42}``, leaving 16 bits
    or fewer to guess), is hidden; about two such keys in 1,000 look otherwise, and are
    shown. Words made of words (``/home/Alice2/cardrules/deploy/staging-state-keys``,
    ``Http2ServerUpgradeCodecFactoryBeanPostProcessor3``) hold more such pairs, and are
    shown, as are words of one case or without a digit (hex digests) and longer words. A
    key cut short, or with letters glued to it, inside a longer word (``/run/secrets/xKEY``)
    is shown, as is one cut to fewer than 40 letters. Of a glued key with a ``/`` of its
    own 2 to 4 letters from an end (3 keys in 200), up to 4 letters are shown: the rest of
    the word is a key's length, reads as a key, and is hidden alone."""
    return _KEY_LIKE.sub(_hidden_word, text)


def _hidden_word(word: re.Match[str]) -> str:
    """The word ``word`` (of ``_KEY_LIKE``), each state key in it hidden: the word whole,
    or a key that begins it, or follows a ``/`` (``https://KEY``, ``/run/secrets/KEY``:
    ``/`` is a letter of base64, so a key after one was read as part of a longer word,
    and shown) or an escape's letters (``\\nKEY``), and ends it or is followed by a ``/``;
    and the word whole when it looks drawn at random (``hide_keys``)."""
    text = word[0]
    if _reads_as_keys(text):
        return KEY_NOT_SHOWN
    slashes = [at for at, char in enumerate(text) if char == "/"]
    starts = {0, *(at + 1 for at in slashes)}
    after_backslash = word.start() > 0 and word.string[word.start() - 1] == "\\"
    letters = _ESCAPE_LETTERS.match(text)
    if after_backslash and letters:
        starts.add(letters.end())
    ends = {*slashes, len(text)}
    # Tried only where a key's length allows: a word of many slashes costs no more.
    windows = [
        (start, start + length)
        for start in starts
        for length in _KEY_TEXT_LENGTHS
        if start + length in ends and _reads_as_keys(text[start : start + length])
    ]
    # A key with letters glued to it, or cut short, in a word that holds no whole key:
    # the word whole, past an escape's letters. The letters glued to a key are hidden
    # with it: where it begins is unknown.
    start = letters.end() if after_backslash and letters else 0
    body = len(text.rstrip("="))
    if (
        not windows
        and _MIN_KEY_PREFIX <= body - start <= _MAX_GLUED_KEY
        and _looks_drawn(text[start:body])
    ):
        windows.append((start, len(text)))
    windows.sort()
    # Windows that overlap are hidden as one: in /run/secrets/KEY, a KEY with a / of its
    # own may have "run/secrets/" and KEY's first part read as a key too, and hiding
    # that alone showed KEY's last part.
    spans: list[list[int]] = []
    for start, end in windows:
        if spans and start < spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    shown: list[str] = []
    done = 0
    for start, end in spans:
        shown += [text[done:start], KEY_NOT_SHOWN]
        done = end
    return "".join(shown) + text[done:]


def _looks_drawn(letters: str) -> bool:
    """Whether ``letters`` look drawn at random as a key's do (``hide_keys``)."""
    return (
        sum(char in _UPPER for char in letters) >= _MIN_UPPER
        and sum(char in _LOWER for char in letters) >= _MIN_LOWER
        and sum(char in _DIGITS for char in letters) >= _MIN_DIGITS
        and sum(a in _LOWER and b in _LOWER for a, b in itertools.pairwise(letters))
        * _LOWER_PAIRS_PER[1]
        < len(letters) * _LOWER_PAIRS_PER[0]
    )


def _shown_path(path: str) -> str:
    """``path`` as a refusal names it: as it is, or quoted as ``repr`` quotes it if it
    holds a character that is not printable, so that the refusal stays one line (a
    Secret of keys and comments wired to the keys file's setting); each state key in
    it hidden (such a Secret does not read as keys whole, but each of its keys does)."""
    return unquoted(path) if path.isprintable() else quoted(path)


def quoted(text: str) -> str:
    """``text`` quoted as ``repr`` quotes it, each state key in it hidden first (design
    section 4): hidden after quoting, a key after a new line or a tab was glued to the
    ``\\n`` or ``\\t`` that ``repr`` wrote, and was shown (a Secret of several keys
    wired to another setting). A byte that is no UTF-8 shows as ``\\xff``
    (``bytes_shown``); a long value is cut short (``_shown``)."""
    return _shown(text, repr)


def unquoted(text: str) -> str:
    """``text`` shown as it is, keys hidden and a long one cut short (``_shown``): a
    path, a number, an argument as typed."""
    return _shown(text, str)


def _shown(text: str, quote: Callable[[str], str]) -> str:
    """``text`` as a refusal shows it, written by ``quote`` (``repr``, or ``str`` for a
    path shown as it is): each state key hidden, then, if what is left is longer than
    ``ECHOED_CHARS``, cut to its first characters, ``CUT_MARK`` and the length of
    ``text`` (``'xxx\u2026' (100000 characters)``). Hidden before the cut: a cut never
    shows part of a key that ``hide_keys`` hides whole."""
    hidden = hide_keys(text)
    if len(hidden) <= ECHOED_CHARS:
        return bytes_shown(quote(hidden))
    kept = hidden[: _kept(hidden, quote)] + CUT_MARK
    return f"{bytes_shown(quote(kept))} ({len(text)} characters)"


def _kept(hidden: str, quote: Callable[[str], str]) -> int:
    """How many of ``hidden``'s first characters a cut shows: as many as ``quote``
    writes in ``ECHOED_CHARS`` characters or fewer (``\\x01`` takes 4), and never part
    of a ``KEY_NOT_SHOWN`` (cut, it would read as a value given)."""
    bare = len(quote(""))
    kept = ECHOED_CHARS
    while kept and len(bytes_shown(quote(hidden[:kept]))) - bare > ECHOED_CHARS:
        kept -= 1
    marker = hidden.find(KEY_NOT_SHOWN, max(0, kept - len(KEY_NOT_SHOWN) + 1))
    return marker if 0 <= marker < kept else kept


def bytes_shown(message: str) -> str:
    """``message`` with each byte of the command line or the environment that is no UTF-8
    written as ``\\xff``, as the shell's ``$'\\xff'`` gives it, whether raw or quoted by
    ``repr``: Python reads such a byte as a lone surrogate (``surrogateescape``), which
    ``repr`` wrote, and stderr's ``backslashreplace`` printed, as ``\\udcff``, a
    character nobody typed."""
    escaped = _SURROGATE_ESCAPE.sub(_byte_escape, message)
    return _SURROGATE.sub(lambda found: f"\\x{ord(found[0]) - 0xDC00:02x}", escaped)


def _byte_escape(found: re.Match[str]) -> str:
    """``\\udcff`` as ``\\xff``; an escaped backslash (``\\\\``) as it is."""
    escape = found[0]
    return escape if escape == "\\\\" else "\\x" + escape[-2:]


def _reads_as_keys(text: str) -> bool:
    """Whether ``text`` parses as state keys, so that no message may quote it (design
    section 4: key material is never logged)."""
    try:
        KeyRing.parse(text)
    except ValueError:
        return False
    return True


def _check_ports(config: ServerConfig, origin: Callable[[str], str]) -> None:
    """Each listener needs a port of its own, and workers need fixed ones to share.

    With workers every socket is bound with SO_REUSEPORT, so gRPC and HTTP on one
    port both bound, and the kernel split the connections between them.
    """
    for first, second in itertools.combinations(("grpc_port", "http_port", "metrics_port"), 2):
        port = getattr(config, first)
        if port and port == getattr(config, second):
            raise ConfigValueError(
                f"{origin(first)} and {origin(second)} are both {port}: "
                "each listener needs a port of its own"
            )
    if config.workers > 1:
        for name in ("grpc_port", "http_port"):
            if getattr(config, name) == 0:
                # Each worker would get a port of its own instead of sharing one.
                raise ConfigValueError(
                    f"{origin('workers')} {config.workers} needs a fixed port, and "
                    f"{origin(name)} is 0 (any free port): each worker would listen "
                    "on a port of its own"
                )
