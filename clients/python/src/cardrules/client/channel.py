"""Channel settings: the retry policy, load balancing and health checking as a gRPC
service config.

The service keeps nothing between calls, so retrying one can never play a
move twice: a retried ``Play`` carries the same state token and yields the
same answer (every RPC but ``NewGame`` is a pure function of its request, and
a retried ``NewGame`` only starts another game). The policy
lives in the channel's service config, where gRPC applies it with backoff and
within the call's overall deadline.

A call to a server that is not listening yet (a client started together
with the server) or for a moment (a quick restart) fails with ``UNAVAILABLE``
at once while the channel waits to reconnect. So the channel also reconnects
sooner than gRPC's defaults (after 100 ms, backing off to at most 1.5 s
instead of 1 s to 120 s), and the retries span about 2.6 s: a call gets
through if the server listens within about 1.5 s of it. A caller who would
rather wait for the server up to the whole deadline passes
``wait_for_ready=True``.

A connection that goes dead without a reset (a network partition, a hung
server) is dropped by keepalive pings within about 15 s, so calls get through
again as soon as the network does (``KEEPALIVE_OPTIONS``).

With a load-balancing policy the channel also checks each server's health:
a server that is shutting down turns ``readiness`` NOT_SERVING and keeps
serving for a moment (``--drain-delay-seconds``), and the channel stops
sending it calls as soon as it hears so (docs/operations.md, "Termination").
"""

from __future__ import annotations

import base64
import binascii
import difflib
import enum
import ipaddress
import json
import math
import numbers
import re
import traceback
import urllib.parse
import uuid
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Self, overload

from grpc import aio

from cardrules.client.errors import REQUEST_ID_KEY, USABLE_REQUEST_ID

#: Fully qualified gRPC service names the retry policy applies to.
SERVICES = ("cardrules.krypkasino.v1.KrypkasinoService",)

#: The retry policy: up to 4 attempts, only after ``UNAVAILABLE`` or ``CANCELLED``.
#:
#: ``CANCELLED`` is what a stopping server answers to the calls gRPC core had
#: received but not yet handed to the service (grpc/grpc#41785): such a call
#: never ran, and a client without health checking (``pick_first``) can meet
#: one at every rolling restart. A call the caller cancels itself is never
#: retried: gRPC retries only statuses that a server sent.
#:
#: gRPC waits ``initialBackoff`` before the first retry and multiplies the wait
#: by ``backoffMultiplier`` each time (at most ``maxBackoff``), each wait
#: jittered by +-20 %: 0.2 s, 0.6 s and 1.8 s, so the last attempt starts about
#: 2.6 s (2.1 s to 3.1 s) after the call. That is long enough for the channel to
#: reconnect to a server that starts listening within about 1.5 s of the call
#: (see ``RECONNECT_OPTIONS``), and leaves the last attempt about 2 s of the
#: default 5 s deadline. The first retry stays quick for a server that answers
#: ``UNAVAILABLE`` itself. gRPC allows at most 5 attempts.
RETRY_POLICY: dict[str, Any] = {
    "maxAttempts": 4,
    "initialBackoff": "0.2s",
    "maxBackoff": "1.8s",
    "backoffMultiplier": 3,
    "retryableStatusCodes": ["UNAVAILABLE", "CANCELLED"],
}

#: How soon the channel reconnects after a failed connection attempt.
#:
#: While the channel waits to reconnect, every attempt of a call fails at once
#: with ``UNAVAILABLE``; with gRPC's defaults (first wait 1 s, growing 1.6-fold
#: up to 120 s) all four attempts are spent before the first reconnect, and
#: after a long outage the channel may not look for the server again for two
#: minutes. Here the first wait is 100 ms (gRPC's minimum), so a channel
#: reconnects at about 0.1, 0.26, 0.52, 0.93, 1.6 and 2.6 s after its first
#: refusal. The longest wait, 1.5 s, is at most 1.8 s with jitter: shorter than
#: the 2.1 s a call's retries span at the least, so even a channel that gave up
#: long ago reconnects within the retries of a call made once the server is
#: back. It is long enough not to hammer a server that is down: each channel
#: makes one connection attempt per 1.5 s or so, and its failing calls never
#: reach the network. ``grpc.min_reconnect_backoff_ms`` is kept at gRPC's
#: default: despite its name it is the least time a connection attempt is
#: given (20 s), and lowering it would cut off slow TLS handshakes.
RECONNECT_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1500),
)

#: Client keepalive: an HTTP/2 ping every 10 s while a call is open, and the
#: connection dropped when a ping goes unanswered for 5 s.
#:
#: A connection whose other end vanished without a reset (a network partition, a
#: hung replica, a NAT or firewall that forgot the flow) otherwise looks open: every
#: call sent over it waits out its deadline (``DEADLINE_EXCEEDED``, not retried),
#: and the kernel retransmits with a backoff growing to 2 minutes, so the client
#: may hear of a healed network that much later. Measured (``pick_first``, 5 s
#: deadlines, 100 ms round trip, then every packet lost for 105 s): without pings
#: every call still failed for 60 s after the network came back (22 s after 60 s
#: lost, 11 s after 30 s), long after the server had dropped its end (grpc's 20 s
#: TCP user timeout); with them the dead connection was dropped about 6 s into the
#: loss and calls got through 0.43 s after it ended. A dead connection goes within
#: about 15 s (5 to 6 s with calls back to back, 14 s with one a second:
#: tests/service/test_client_blackhole.py), and so does a hung replica behind
#: ``round_robin`` (clients/python/README.md).
#:
#: The ping timeout is lowered from grpc's 60 s, which the keepalive ping waits out
#: (grpcio 1.85 did not apply ``grpc.keepalive_timeout_ms``). The server accepts a
#: ping every 5 s, also without calls (docs/operations.md, "Keepalive").
#: ``grpc.keepalive_permit_without_calls`` stays off (grpc's default): an idle
#: connection needs no checking until a call comes, whose pings then find it dead,
#: and proxies are often stricter about pings without calls. A proxy that allows
#: fewer pings answers GOAWAY ``too_many_pings``; ``options=`` with
#: ``("grpc.keepalive_time_ms", 2**31 - 1)`` (never) and
#: ``("grpc.http2.ping_timeout_ms", 60_000)`` restores grpc's defaults.
KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.http2.ping_timeout_ms", 5_000),
)

#: The health service name that client-side health checking watches: the
#: server's readiness, which turns NOT_SERVING when the server begins to drain.
HEALTH_CHECK_SERVICE = "readiness"

#: Default deadline of every call, in seconds (the proto documents 1 s per RPC;
#: the slack covers retries and a cold connection).
DEFAULT_TIMEOUT = 5.0

ChannelOptions = list[tuple[str, Any]]

#: The load-balancing policies ``load_balancing=`` takes: gRPC's that need no settings
#: of their own. ``weighted_round_robin`` weighs servers by the load they report, which
#: this service does not: it spreads calls as ``round_robin`` does.
LOAD_BALANCING_POLICIES = ("pick_first", "round_robin", "weighted_round_robin")


def check_load_balancing(load_balancing: object) -> None:
    """Refuse a policy gRPC does not know, or needs settings for, as the client is made.

    grpc takes any name and then fails every call with ``INVALID_ARGUMENT`` ("errors
    validating service config"), the code the service gives a bad request, so a typo
    such as ``"roundrobin"`` would read as a refusal of the request itself.
    """
    if load_balancing is None or load_balancing in LOAD_BALANCING_POLICIES:
        return
    if not isinstance(load_balancing, str):
        raise TypeError(f"load_balancing must be a policy name or None, not {load_balancing!r}")
    close = difflib.get_close_matches(load_balancing, LOAD_BALANCING_POLICIES, n=1)
    hint = f": did you mean {close[0]!r}?" if close else ""
    raise ValueError(
        f"load_balancing must be one of {', '.join(LOAD_BALANCING_POLICIES)} or None, "
        f"not {load_balancing!r}{hint}"
    )


def service_config(
    load_balancing: str | None = None, services: Sequence[str] = SERVICES
) -> dict[str, Any]:
    """The service config: the retry policy and, if given, a load-balancing policy
    (one of ``LOAD_BALANCING_POLICIES``: else ``ValueError``, or ``TypeError`` for one
    that is no string).

    ``load_balancing="round_robin"`` spreads calls over every address that a
    ``dns:///`` target resolves to, such as the pods behind a headless
    Kubernetes Service; gRPC's default (``pick_first``) sticks to one of them.

    A load-balancing policy comes with client-side health checking
    (``healthCheckConfig``): the channel watches each server's
    ``HEALTH_CHECK_SERVICE`` and sends calls only to servers that report
    SERVING. A draining server reports NOT_SERVING before it stops, so no
    call is sent to it once it has begun to stop. A call with no healthy
    server left fails at once with ``UNAVAILABLE`` (and is retried). Servers
    without a health service count as healthy. gRPC applies health checking
    under ``round_robin`` and similar policies and ignores it under
    ``pick_first``.
    """
    check_load_balancing(load_balancing)
    config: dict[str, Any] = {
        "methodConfig": [
            {
                "name": [{"service": service} for service in services],
                "retryPolicy": dict(RETRY_POLICY),
            }
        ]
    }
    if load_balancing is not None:
        config["loadBalancingConfig"] = [{load_balancing: {}}]
        config["healthCheckConfig"] = {"serviceName": HEALTH_CHECK_SERVICE}
    return config


def channel_options(
    load_balancing: str | None = None, extra: Sequence[tuple[str, Any]] | None = ()
) -> ChannelOptions:
    """Options for ``grpc.insecure_channel`` / ``grpc.secure_channel`` (or their ``aio`` twins).

    Use them to build your own channel with the client's retry policy
    (``RETRY_POLICY``: ``UNAVAILABLE`` and ``CANCELLED``, up to 4 attempts over
    about 2.6 s)
    and its quick reconnection (``RECONNECT_OPTIONS``), so that a call made
    while the server is not listening yet, or restarting, gets through if the
    server listens within about 1.5 s, and its keepalive pings
    (``KEEPALIVE_OPTIONS``), which drop a connection the network swallowed.
    When an option is given twice, grpc keeps the first, so ``extra`` options
    go first and override the client's; ``None`` is none, as in grpc's own
    ``options`` (the clients pass theirs on here).
    """
    extra = () if extra is None else extra
    given = {name for name, _ in extra}
    defaults = [
        ("grpc.enable_retries", 1),
        ("grpc.service_config", json.dumps(service_config(load_balancing))),
        *RECONNECT_OPTIONS,
        *KEEPALIVE_OPTIONS,
    ]
    return [*extra, *(option for option in defaults if option[0] not in given)]


class UseDefault(enum.Enum):
    """Marks a per-call ``timeout`` that was not given: the client's default applies."""

    TIMEOUT = enum.auto()


#: Pass as ``timeout`` (or omit it) to use the client's default deadline.
DEFAULT = UseDefault.TIMEOUT

#: A per-call deadline in seconds; ``None`` means no deadline, ``DEFAULT`` the client's.
Timeout = float | None | UseDefault

#: Call metadata as ``(key, value)`` pairs: lowercase keys, printable ASCII text values;
#: binary values need keys ending in ``-bin`` (see ``checked_metadata``).
Metadata = Sequence[tuple[str, str | bytes]]

#: The characters gRPC sends in a metadata key (HTTP/2 header names are lowercase).
_METADATA_KEY = re.compile("[0-9a-z_.-]+")
#: The characters gRPC sends in a text (not ``-bin``) metadata value.
_METADATA_TEXT = re.compile("[ -~]*")


def call_metadata(metadata: Metadata | None) -> tuple[tuple[str, str | bytes], ...]:
    """``checked_metadata``, with an ``x-request-id`` of the client's own (32 hex digits)
    unless the caller gave one.

    gRPC sends a retry with the metadata of the call, so every attempt of a retried call
    carries the same id: the server's request lines of all of them name it, and it is
    the id ``errors.request_id`` gives for the failed call (from the server's trailer, or
    from ``errors.note_sent_request_id`` when none came). An id the service would not take
    (docs/api.md, "Request ids") raises ``ValueError``: the service would make up another
    for each attempt.
    """
    pairs = checked_metadata(metadata) or ()
    given = [value for key, value in pairs if key == REQUEST_ID_KEY]
    if not given:
        return (*pairs, (REQUEST_ID_KEY, uuid.uuid4().hex))
    # The service takes the first; grpc sends None as an empty value.
    text: object = given[0].decode("latin-1") if isinstance(given[0], bytes) else given[0]
    if not isinstance(text, str) or USABLE_REQUEST_ID.fullmatch(text) is None:
        raise _unusable_request_id()
    return pairs


def _unusable_request_id() -> ValueError:
    """The refusal of an ``x-request-id`` value the service would not take, or that gRPC
    cannot send (docs/api.md, "Request ids")."""
    return ValueError(
        f"metadata key {REQUEST_ID_KEY!r} cannot be used: a request id is 1 to 128 "
        "printable ASCII characters with spaces only inside; the service would log "
        "the call under an id of its own"
    )


def checked_metadata(metadata: Metadata | None) -> tuple[tuple[str, str | bytes], ...] | None:
    """Call metadata as a tuple, refused with ``ValueError`` where gRPC cannot send it.

    gRPC fails such a call itself, but obscurely: the blocking client with ``INTERNAL``
    "Invalid metadata", as if the server had failed, and the asyncio client with an
    ``ExecuteBatchError`` that is no ``grpc.RpcError``. The commonest case is a key
    with capitals, such as ``X-Request-Id`` (the HTTP header's spelling). The message
    names the key, never the value, which may be a credential. Keys and values of other
    types are left to grpc, which refuses them with ``TypeError``.
    """
    if metadata is None:
        return None
    if isinstance(metadata, Mapping):
        # tuple() of a dict is its keys, each then unpacked as a pair: a baffling error.
        raise TypeError(
            "metadata is a sequence of (key, value) pairs, not a mapping: pass "
            "list(metadata.items())"
        )
    pairs = tuple(metadata)
    given: tuple[tuple[object, object], ...] = pairs  # as called, whatever the types say
    for key, value in given:
        if not isinstance(key, str):
            continue
        if _METADATA_KEY.fullmatch(key) is None:
            lower = key.lower()
            hint = f": use {lower!r}" if _METADATA_KEY.fullmatch(lower) else ""
            raise ValueError(
                f"metadata key {key!r} cannot be sent: gRPC keys are lowercase letters, "
                f"digits, '-', '_' and '.'{hint}"
            )
        if key.endswith("-bin"):
            continue
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        if isinstance(text, str) and _METADATA_TEXT.fullmatch(text) is None:
            if key == REQUEST_ID_KEY:
                # Not the advice below: the service reads no x-request-id-bin.
                raise _unusable_request_id()
            raise ValueError(
                f"the value of metadata key {key!r} cannot be sent: a text value is printable "
                "ASCII (space to '~'); send bytes under a key ending in '-bin'"
            )
    return pairs


def check_channel_arguments(
    target: str | None, channel: object | None, has_channel_settings: bool, *, asynchronous: bool
) -> None:
    """Exactly one of ``target`` and ``channel``, a channel of the client's kind (asyncio or
    not: the other kind fails only at the first call, and obscurely), and channel settings
    only with a target."""
    if (target is None) == (channel is None):
        raise TypeError("give exactly one of target and channel")
    if channel is not None and isinstance(channel, aio.Channel) != asynchronous:
        wanted = "grpc.aio" if asynchronous else "grpc (not grpc.aio)"
        raise TypeError(f"channel must be a {wanted} channel, not {type(channel).__name__}")
    if target is not None:
        check_target(target)
    if channel is not None and has_channel_settings:
        raise TypeError(
            "credentials, load_balancing and options configure a channel the client creates; "
            "build a given channel with channel_options() instead"
        )


def not_picklable(client: object) -> TypeError:
    """The error of pickling (or copying) a client (README, "One client for the whole
    process"): its channel is a connection of this process, which grpc cannot pickle
    but says so only as "no default __reduce__ due to non-trivial __cinit__"."""
    return TypeError(
        f"{type(client).__name__} cannot be pickled or copied, as its grpc channel belongs "
        "to this process: create the client in the worker process that uses it (in a "
        "process pool, in the pool's initializer) and share it within that process"
    )


#: The number a port starts with, as grpc reads it (as C's ``atoi`` and ``sscanf`` do:
#: C's white space and a sign, and whatever follows ignored where it reads an ``ipv4:``
#: address), which it takes modulo 2^16: ``-1`` dials 65535, ``+99999`` 34463.
_C_SPACE = " \t\n\v\f\r"
_NUMBER = re.compile(f"[{_C_SPACE}]*[-+]?([0-9]+)")

#: The longest deadline a call may have: grpc fails every call at once with
#: DEADLINE_EXCEEDED past about 7e9 s, where the deadline overflows its clock.
MAX_TIMEOUT = 1e9

#: Target schemes that name addresses with ports (``dns:``, ``ipv4:``, ``ipv6:``).
_ADDRESS_SCHEMES = ("dns", "ipv4", "ipv6")


def clear_call_frames(error: BaseException) -> None:
    """Clear the locals of the finished frames in ``error``'s traceback (the client's
    ``_invoke`` and grpc's, which hold the request, tokens and all), keeping the frames
    themselves: file, line and function stay in the traceback.

    Called by each public method of the clients on any exception, before it re-raises
    it (``KrypkasinoClient._invoke``). The method's own frame, still running, is left to
    it (``traceback.clear_frames`` skips it). Only ``error``'s own traceback is cleared:
    an exception it was raised while handling may be the caller's, with the caller's
    frames.
    """
    traceback.clear_frames(error.__traceback__)


def checked_timeout(timeout: object) -> float | None:
    """A deadline in seconds as a float, refused unless over 0 and at most ``MAX_TIMEOUT``
    (or ``None``: no deadline).

    grpc would take 0 or a negative number as a deadline already passed, and one
    past its clock's range too; a string it refuses only at the first call, with
    a ``TypeError`` about operands. Any real number will do (``Fraction``, ``Decimal``,
    numpy's).
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real | Decimal):
        raise TypeError(f"timeout must be a number of seconds or None, not {timeout!r}")
    try:
        seconds = float(timeout)
    except OverflowError:
        seconds = math.inf
    if not 0 < seconds <= MAX_TIMEOUT:
        raise ValueError(
            f"timeout must be over 0 and at most {MAX_TIMEOUT:.0e} seconds, or None for no "
            f"deadline, not {timeout!r}"
        )
    return seconds


class DefaultTimeout:
    """A client's ``timeout`` attribute, its default deadline: checked by ``checked_timeout``
    whenever it is set, so a later ``client.timeout = 0`` fails there and then, not as
    ``DEADLINE_EXCEEDED`` at every call after it."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._attribute = f"_{name}"

    @overload
    def __get__(self, instance: None, owner: type) -> Self: ...

    @overload
    def __get__(self, instance: object, owner: type) -> float | None: ...

    def __get__(self, instance: object, owner: type) -> Self | float | None:
        if instance is None:
            return self
        seconds: float | None = getattr(instance, self._attribute)
        return seconds

    def __set__(self, instance: object, timeout: float | None) -> None:
        setattr(instance, self._attribute, checked_timeout(timeout))


#: What a URL starts with that is no gRPC target (grpc looks the whole URL up as a host
#: name, and every call fails with UNAVAILABLE): the HTTP gateway's address, or a
#: ``grpc://`` URL as other tools write one.
_URL_SCHEMES = ("http://", "https://", "grpc://", "grpcs://")

#: Target schemes that name no host:port: a socket path may end in ``:70000`` of its own.
_OTHER_SCHEMES = ("unix", "unix-abstract", "vsock", "xds")
#: Of those, the schemes of a Unix socket, whose target takes no authority.
_SOCKET_SCHEMES = ("unix", "unix-abstract")


#: A URI scheme followed by an authority, as in ``google-c2p:///NAME``.
_URI_SCHEME = re.compile("([A-Za-z][A-Za-z0-9+.-]*)://")

#: The target schemes of grpc's own resolvers: it reads any other ``scheme://`` target
#: (``ws://host:1``) as a host name to look up, and fails every call with UNAVAILABLE.
GRPC_SCHEMES = (*_ADDRESS_SCHEMES, *_OTHER_SCHEMES, "google-c2p")


#: A state key as the server reads one (service/tokens.py, ``KeyRing.parse``): base64 of
#: 32 bytes, standard or urlsafe. Only its padded form, 43 letters and an ``=``, is looked
#: for: what ``cardrules keygen`` and ``openssl rand -base64 32`` print. No host name
#: holds an ``=``, while one may well be 43 letters long. A key stands alone or after a
#: ``/`` (``/`` is a letter of base64: ``dns:///KEY``, ``HOST:PORT/KEY``), and is no part
#: of a longer word of base64.
_STATE_KEY = re.compile(r"(?<![A-Za-z0-9+_=-])[A-Za-z0-9+/_-]{43}=(?![A-Za-z0-9+_=-])")
#: What a target's messages show in place of a state key (as ``cardrules simulate`` does).
KEY_NOT_SHOWN = "[a state key, not shown]"
#: A user and password before an ``@`` (``https://bob:PASS@host``, ``bob:PASS@host:443``):
#: all of a part between ``/`` up to its last ``@`` (an unescaped password may hold one),
#: but for one of grpc's schemes that starts the target (``dns:bob:PASS@host``).
_USERINFO = re.compile(
    "(^(?:{}):)?[^/]*@".format("|".join(map(re.escape, GRPC_SCHEMES))), re.IGNORECASE
)


def _is_state_key(word: str) -> bool:
    """Whether ``word`` (of ``_STATE_KEY``) decodes to 32 bytes, as a state key does."""
    try:
        key = base64.b64decode(word.replace("-", "+").replace("_", "/"), validate=True)
    except binascii.Error:
        return False
    return len(key) == 32


def _hidden(text: str) -> str:
    """``text`` (a target, or a part of one) as its refusals show it: each state key in it
    as ``KEY_NOT_SHOWN``, and a user and password before an ``@`` as ``***@``
    (``https://***@rules.example.com``)."""
    text = _STATE_KEY.sub(lambda word: KEY_NOT_SHOWN if _is_state_key(word[0]) else word[0], text)
    return _USERINFO.sub(lambda userinfo: f"{userinfo[1] or ''}***@", text)


def _quoted(text: str) -> str:
    """``text`` as a refusal quotes it: ``repr`` of ``_hidden(text)``."""
    return repr(_hidden(text))


def is_ipv6(address: str) -> bool:
    """Whether ``address`` is an IPv6 address (without brackets and port)."""
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    return True


def check_target(target: str, *, need_port: bool = False) -> None:
    """Refuse, with ``ValueError``, a target that grpc takes quietly and then dials
    elsewhere or not at all, failing only at the first call.

    grpc takes a port modulo 2^16 (``127.0.0.1:99999`` dials port 34463); of a port
    that is no number it reads the leading digits in an ``ipv4:`` target
    (``ipv4:127.0.0.1:50051x`` dials 50051) and fails every call to a host name, as it
    does to a host with white space or a control character in it (a pasted line
    break); it reads an ``http://`` URL (such as the HTTP gateway's address), a
    ``grpc://`` one or any ``scheme://`` of no resolver of its own (``ws://host:1``) as
    a host name to look up, and an empty target fails each call with
    ``UNKNOWN``, as does one that names no address after its authority
    (``dns://localhost:50051``, which has two slashes where ``dns:///localhost:50051``
    has three) or a Unix socket's that names an authority at all (``unix://tmp/x.sock``,
    ``unix-abstract://name``), and an ``ipv4:`` or ``ipv6:`` address without a port
    (``ipv4:127.0.0.1``); a ``/`` or a path after the address (``localhost:50051/``,
    ``localhost:50051/cardrules``, which only an ``ipv4:`` or ``ipv6:`` list ignores),
    a ``,`` in a ``dns:`` or plain target (``localhost:50051,localhost:50052`` or
    ``localhost:50051,``: only an ``ipv4:`` or ``ipv6:`` target is a list, whose empty
    elements grpc skips), an ``ipv4:`` or ``ipv6:`` list of none but empty elements
    (``ipv4:,``), a host with a ``:`` of its own that is no IPv6 address
    (``localhost:50051:1``) or an empty host (``:50051``) fails every call with
    ``UNAVAILABLE``, and it dials 443
    for an empty port (``localhost:``). All these are refused, so a typo never dials a
    port nobody meant. Every other form is left to grpc:
    ``dns:///``, ``ipv4:``, ``ipv6:``, ``unix:``, ``unix-abstract:``, ``vsock:``,
    ``xds:`` and ``google-c2p:`` targets, and a host without
    a port (an IPv6 address such as ``::1`` too), which dials 443, the port of TLS;
    ``need_port`` refuses that too.

    A target that holds a state key (``_STATE_KEY``: a secret wired to the wrong
    variable) is refused first (but in the path of a ``unix:`` target or the name of a
    ``unix-abstract:`` one: a file name is the user's choice, a hash in base64 say), and a
    host with a URL's user and password
    (``bob:PASS@host:443``) is refused. No message quotes a state key or a user and
    password: they show as ``[a state key, not shown]`` and ``***@`` (``_hidden``).
    """
    if not target.strip():
        raise ValueError("the target is empty: give host:port, such as localhost:50051")
    # A state key (a secret wired to the wrong variable): the refusals below would quote
    # parts of it, and grpc's errors the whole target (design section 4). grpc decodes %XX,
    # and so do the refusals below as they quote a part. Not in a Unix socket's path or
    # name, a file name of the user's choosing (a hash in base64 looks like a key): only a
    # socket target with an authority (unix://HOST/..., refused below anyway) is looked at.
    first, _, after = target.partition(":")
    first = first.lower()
    if first not in _SOCKET_SCHEMES or (after.startswith("//") and after[2:3] != "/"):
        form = {"unix": "unix:///ABSOLUTE/PATH", "unix-abstract": "unix-abstract:NAME"}.get(
            first, "HOST:PORT, such as localhost:50051"
        )
        for text in (target, urllib.parse.unquote(target)):
            if any(_is_state_key(word[0]) for word in _STATE_KEY.finditer(text)):
                raise ValueError(
                    f"{_quoted(text)} is no gRPC target: it holds a state key; give {form}"
                )
    if target.lower().startswith(_URL_SCHEMES):
        raise ValueError(
            f"{_quoted(target)} is a URL: a gRPC target is host:port, such as localhost:50051 "
            "(the gRPC port, not the HTTP gateway's); for TLS pass "
            "credentials=grpc.ssl_channel_credentials()"
        )
    if (uri := _URI_SCHEME.match(target)) and uri[1].lower() not in GRPC_SCHEMES:
        raise ValueError(
            f"{_quoted(target)} is a URL of a scheme grpc does not know ({uri[1]!r}): a gRPC "
            "target is host:port, such as localhost:50051, or one of grpc's own, such as "
            "dns:///HOST:PORT or unix:///PATH"
        )
    scheme, _, rest = target.partition(":")
    if scheme.lower() in _SOCKET_SCHEMES and rest.startswith("//"):
        # grpc takes no authority in a socket's target (unix://tmp/x.sock names one,
        # tmp): every call fails with UNKNOWN ("the target uri is not valid").
        after = rest[2:]
        if authority := re.split("[/?#]", after, maxsplit=1)[0]:
            if scheme.lower() == "unix":
                form = (
                    f"{scheme}:/ABSOLUTE/PATH or {scheme}:///ABSOLUTE/PATH (three slashes), "
                    f"e.g. {scheme}:///{_hidden(after)}"
                )
            else:
                form = f"{scheme}:NAME, e.g. {scheme}:{_hidden(after)}"
            raise ValueError(
                f"{_quoted(target)} names an authority ({_quoted(authority)}), which a "
                f"{scheme}: target takes none of: give {form}"
            )
    if scheme.lower() in _OTHER_SCHEMES:
        return
    if scheme.lower() in _ADDRESS_SCHEMES:
        # grpc reads what follows "//" up to the next "/" as the authority (a DNS server)
        # and only the rest as addresses: dns://localhost:50051 names none, and every call
        # fails with UNKNOWN ("the target uri is not valid"), as for an empty target.
        names = re.split("[?#]", rest, maxsplit=1)[0]
        if names.startswith("//"):
            names = names[2:].partition("/")[2]
        if not names.strip("/"):
            raise ValueError(
                f"{_quoted(target)} names no address: give {scheme}:///HOST:PORT, with three "
                f"slashes (after {scheme}:// comes an authority, such as a DNS server, then "
                "/HOST:PORT)"
            )
    # grpc reads a target as a URI: it drops a query and a fragment, and decodes %XX.
    addresses = urllib.parse.unquote(re.split("[?#]", target, maxsplit=1)[0])
    lowered = scheme.lower()
    if lowered in _ADDRESS_SCHEMES:
        # After dns: or dns://AUTHORITY/ (a DNS server) come the addresses.
        addresses = addresses.partition(":")[2]
        if addresses.startswith("//"):
            addresses = addresses[2:].partition("/")[2]
    elif _URI_SCHEME.match(target):
        # A scheme of grpc's own that this module does not know (google-c2p:///NAME):
        # what follows its last "/" is left to grpc, as it always was.
        addresses = addresses.rpartition("/")[2]
    listed = lowered in ("ipv4", "ipv6")
    # Of the schemes read here only ipv4: and ipv6: list several addresses, and grpc skips
    # an empty one (ipv4:127.0.0.1:50051, is one address); a dns: or plain target is one
    # name. A scheme this module does not know is split as it always was.
    single = not listed and (lowered == "dns" or _URI_SCHEME.match(target) is None)
    elements = [addresses] if single else [part for part in addresses.split(",") if part]
    if not elements and listed:
        # grpc fails every call with UNAVAILABLE ("empty address list").
        raise ValueError(
            f"{_quoted(target)} names no address: give {scheme}:ADDRESS:PORT, e.g. "
            + ("ipv4:127.0.0.1:50051" if lowered == "ipv4" else "ipv6:[::1]:50051")
        )
    for element in elements:
        address, slash, path = element.partition("/")
        if slash and not listed:  # an ipv4: or ipv6: list ignores it
            # grpc's resolver reads "localhost:50051/" as a port of "50051/" and
            # "localhost:50051/x" as one of "50051/x": every call fails with UNAVAILABLE.
            if not path:
                raise ValueError(
                    f"{_quoted(target)} ends its address with '/': give HOST:PORT, e.g. "
                    "localhost:50051"
                )
            raise ValueError(
                f"{_quoted(target)} has a path after its address ('/{_hidden(path)}'): a gRPC "
                "target names no path; give HOST:PORT, e.g. localhost:50051"
            )
        if "," in address and single:
            # grpc looks "localhost:50051,localhost:50052" up as one name, with a port of
            # "50052" after a host of "localhost:50051,localhost", and "localhost:50051," with
            # a port of "50051,": every call fails with UNAVAILABLE.
            raise ValueError(
                f"{_quoted(target)} has a ',' in its address: only an ipv4: or ipv6: target "
                "lists addresses (ipv4:127.0.0.1:50051,127.0.0.2:50051); give one HOST:PORT, "
                "e.g. localhost:50051"
            )
        if address.startswith("[") and "]" in address:  # [IPv6]:PORT
            bracketed, _, after = address.partition("]")
            host, colon, port = bracketed + "]", after[:1], after[1:]
        elif is_ipv6(address):  # an IPv6 address without a port, such as ::1
            host, colon, port = address, "", ""
        else:
            host, colon, port = address.rpartition(":")
            if ":" in host and "@" in host:
                # A URL's user and password (bob:PASS@host:443), which grpc looks up as part
                # of the host's name: every call fails with UNAVAILABLE.
                raise ValueError(
                    f"{_quoted(target)} names a user and password (before its '@'), which a "
                    "gRPC target takes none of: give HOST:PORT, e.g. localhost:50051, and "
                    "the credentials with credentials= or the call's metadata"
                )
            if ":" in host:
                # grpc would read localhost:50051:1 as an IPv6 address, and fail every call.
                raise ValueError(
                    f"{_quoted(target)} has a ':' too many: give HOST:PORT, e.g. "
                    "localhost:50051, with an IPv6 address in brackets, e.g. [::1]:50051"
                )
        if colon and not host.strip():
            # grpc fails every call to ":50051" (its resolver finds no host).
            raise ValueError(f"{_quoted(target)} has no host: give HOST:PORT, e.g. localhost:50051")
        if any(char.isspace() or not char.isprintable() for char in (host if colon else address)):
            raise ValueError(
                f"the host in target {_quoted(target)} holds white space or a control "
                "character: give HOST:PORT, e.g. localhost:50051"
            )
        if colon and not port:
            # grpc dials 443 for "localhost:": a colon with nothing after it is a typo.
            raise ValueError(
                f"{_quoted(target)} has an empty port: give HOST:PORT, e.g. localhost:50051"
            )
        if not colon:
            if listed:
                # grpc fails every call with UNKNOWN ("no port given for ipv4 scheme").
                example = "ipv4:127.0.0.1:50051" if lowered == "ipv4" else "ipv6:[::1]:50051"
                raise ValueError(
                    f"{_quoted(target)} has no port for {_quoted(element)}: every address of "
                    f"an {scheme}: target needs one, e.g. {example}"
                )
            if need_port:
                raise ValueError(
                    f"{_quoted(target)} has no port: give HOST:PORT, e.g. localhost:50051"
                )
            continue
        # Digits counted first: Python reads no more than 4,300 of them.
        if (number := _NUMBER.match(port)) is not None and not (
            number.end() == len(port.rstrip(_C_SPACE))
            and len(number[1].lstrip("0")) <= 5
            and 1 <= int(number[0]) <= 65535
        ):
            raise ValueError(
                f"port must be a number from 1 to 65535, not {_hidden(port)}, in target "
                f"{_quoted(target)}"
            )
