"""A loopback TCP listener that takes connections and never answers a byte: a call to
it, or through it as a proxy, waits (grpc's handshake never ends) until its deadline."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """Its ``127.0.0.1:PORT``; connections wait in the listening socket's backlog."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"127.0.0.1:{listener.getsockname()[1]}"
