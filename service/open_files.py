"""File descriptors: the open-files limit a server raises at start-up, and the event
loop's report of accept errors once they run out (docs/operations.md, "Sizing")."""

from __future__ import annotations

import asyncio
import resource
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from service.config import host_port
from service.logs import OncePerWindow, get_logger

_log = get_logger("cardrules.server")


#: macOS's ``OPEN_MAX``: the highest soft limit on open files it takes, whose hard limit
#: is infinite (``RLIM_INFINITY``), which it refuses as a soft one.
FINITE_OPEN_FILES = 10240


def raise_open_files_limit() -> None:
    """Raise the soft limit on open files to the hard one, as Go's runtime does: every
    connection holds a descriptor, and the common soft default of 1,024 stopped the
    server accepting at about a thousand idle clients (docs/operations.md, "Sizing").
    Where the hard one cannot be set (macOS: infinite, with a soft 256), the soft limit
    goes to ``FINITE_OPEN_FILES`` if that is higher (``soft_limits_to_try``)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    set_first_soft_limit(soft_limits_to_try(soft, hard), hard)


def soft_limits_to_try(soft: int, hard: int) -> list[int]:
    """The soft limits on open files to try, given the present ``soft`` and ``hard``
    ones: the hard one, then ``FINITE_OPEN_FILES`` if that lies between them; none if
    the soft limit already is the hard one."""
    if soft == hard:
        return []
    return [hard] + ([FINITE_OPEN_FILES] if soft < FINITE_OPEN_FILES < hard else [])


def set_first_soft_limit(limits: list[int], hard: int) -> int | None:
    """Set the soft limit on open files to the first of ``limits`` that ``setrlimit``
    takes, and return it; None, the limit unchanged, if it takes none."""
    for limit in limits:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
        except (ValueError, OSError):
            continue
        return limit
    return None


class AcceptErrorsOncePerWindow:
    """The event loop's exception handler: asyncio's "out of system resource" on accept
    (no descriptors left) at most once per ``window`` seconds, naming the ``listener``
    (``http``) and the ``address`` whose accept failed and how many connections wait in
    its queue (``held_back``); everything else as asyncio's default handler reports it.

    asyncio (3.11 to 3.13) reports that error for every connection it tries to accept
    while descriptors run out: tens of thousands of lines a second, which fill the log
    and take a core.
    """

    MESSAGE = "socket.accept() out of system resource"

    # The loop's only listeners are the HTTP gateway's: gRPC's core accepts its own
    # connections, and the metrics server accepts on a thread of its own.
    LISTENER = "http"

    def __init__(self, window: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self._reports = OncePerWindow(window, clock)

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != self.MESSAGE:
            loop.default_exception_handler(context)
            return
        if not self._reports.due():
            return
        listening = context.get("socket")
        # ``listener`` and ``address`` as ``cannot listen`` has them (docs/operations.md).
        _log.error(
            "no file descriptors left: connections wait to be accepted",
            error=str(context.get("exception")),
            listener=self.LISTENER,
            address=_address(listening),
            held_back=_accept_queue(listening),
        )


# struct tcp_info (linux/tcp.h): eight one-byte fields, then rto, ato, snd_mss, rcv_mss
# and unacked, 32 bits each. For a listener the kernel fills unacked with the length
# of its accept queue.
_TCP_INFO_BYTES = 104
_TCPI_UNACKED_OFFSET = 24


def _accept_queue(listener: Any) -> int | None:
    """How many connections wait to be accepted on ``listener``; None where the system
    does not tell (no ``TCP_INFO``: not Linux).

    Counting the reports held back instead, as before, said 0 in the first line of
    every episode, and later the retries of asyncio, not connections.
    """
    option = getattr(socket, "TCP_INFO", None)
    if listener is None or option is None:
        return None
    try:
        info = listener.getsockopt(socket.IPPROTO_TCP, option, _TCP_INFO_BYTES)
        waiting: int = struct.unpack_from("=I", info, _TCPI_UNACKED_OFFSET)[0]
    except (OSError, struct.error):
        return None
    return waiting


def _address(listener: Any) -> str | None:
    """``host:port`` of a listening socket, or None."""
    try:
        host, port = listener.getsockname()[:2]
    except (AttributeError, OSError, TypeError, ValueError):
        return None
    return host_port(str(host), int(port))
