"""The request id of a client call that ends ``DEADLINE_EXCEEDED`` (clients/python/README.md,
"Errors"): the server sends its ``x-request-id`` trailer only with an answer, none past a
deadline (docs/api.md, "Errors"), so ``request_id(error)`` gives the id the call was sent
with, the one the server received and logged, and one id for all attempts of a retried call.

The server here is a real gRPC server on loopback whose ``Score`` holds every call until
its deadline has passed, so each call ends ``DEADLINE_EXCEEDED`` whatever the machine's load.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from cardrules.client import AsyncKrypkasinoClient, KrypkasinoClient, request_id

SERVICE = "cardrules.krypkasino.v1.KrypkasinoService"

#: What the server received of each attempt: its ``x-request-id`` and
#: ``grpc-previous-rpc-attempts`` (``None`` on a first attempt).
Attempt = tuple[str | None, str | None]


class HoldingServicer:
    """``Score`` that records each attempt and answers none: it waits until grpc ends the
    call at its deadline. With ``refuse_first``, a first attempt is refused ``UNAVAILABLE``,
    which the client's retry policy retries, and only the retry is held."""

    def __init__(self, *, refuse_first: bool) -> None:
        self.refuse_first = refuse_first
        self.attempts: list[Attempt] = []
        self.lock = threading.Lock()

    def score(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        # The first value of each key, as the service takes a repeated x-request-id.
        received: dict[str, str | bytes] = {}
        for key, value in context.invocation_metadata():
            received.setdefault(key, value)
        attempt = (received.get("x-request-id"), received.get("grpc-previous-rpc-attempts"))
        with self.lock:
            self.attempts.append((_text(attempt[0]), _text(attempt[1])))
        if self.refuse_first and attempt[1] is None:
            context.abort(grpc.StatusCode.UNAVAILABLE, "refused, to be retried")
        ended = threading.Event()
        # Run when the call ends, here at its deadline; False if it has ended already.
        if context.add_callback(ended.set):
            ended.wait(30)
        return b""


def _text(value: str | bytes | None) -> str | None:
    """A metadata value as received, as text (grpc gives text values as ``str``)."""
    return value.decode() if isinstance(value, bytes) else value


@contextlib.contextmanager
def holding_server(servicer: HoldingServicer) -> Iterator[str]:
    """A real in-process gRPC server on a free loopback port that serves ``Score`` only."""
    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(
        servicer.score  # raw bytes in and out
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(SERVICE, {"Score": handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(None)


def timed_out(
    target: str, metadata: list[tuple[str, str]], timeout: float, *, asynchronous: bool
) -> grpc.RpcError:
    """The error of a ``Score`` call of the sync or the asyncio client to ``target``."""
    if asynchronous:

        async def call() -> grpc.RpcError:
            async with AsyncKrypkasinoClient(target) as client:
                with pytest.raises(grpc.RpcError) as raised:
                    await client.score(state=b"s", timeout=timeout, metadata=metadata)
                return raised.value

        return asyncio.run(call())
    with KrypkasinoClient(target) as client, pytest.raises(grpc.RpcError) as raised:
        client.score(state=b"s", timeout=timeout, metadata=metadata)
    return raised.value


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "asyncio"])
@pytest.mark.parametrize("retried", [False, True], ids=["one-attempt", "retried"])
def test_a_call_past_its_deadline_has_the_request_id_the_server_received(
    asynchronous: bool, retried: bool
) -> None:
    """A call with the client's own id and one with the caller's, at once: each error gives
    the id the server received with every attempt of its call. The deadline leaves a retry
    (about 0.2 s after the refusal) its turn however busy the machine."""
    servicer = HoldingServicer(refuse_first=retried)
    timeout = 2.0 if retried else 1.0
    with holding_server(servicer) as target, futures.ThreadPoolExecutor(2) as calls:
        made, own = calls.map(
            lambda metadata: timed_out(target, metadata, timeout, asynchronous=asynchronous),
            [[], [("x-request-id", "ticket 7")]],
        )
    assert made.code() == own.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert not made.trailing_metadata()  # the server sent no request id back
    given = request_id(made)
    assert given is not None and re.fullmatch("[0-9a-f]{32}", given)
    assert request_id(own) == "ticket 7"
    retries = ["1"] if retried else []
    assert sorted(servicer.attempts, key=str) == sorted(
        [(sent, attempt) for sent in (given, "ticket 7") for attempt in [None, *retries]], key=str
    )


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "asyncio"])
def test_a_call_past_its_deadline_with_two_request_ids_has_the_first(asynchronous: bool) -> None:
    """Metadata may repeat ``x-request-id``; the service takes the first (docs/api.md,
    "Request ids"), and so does ``request_id`` of a call that got no trailer back."""
    servicer = HoldingServicer(refuse_first=False)
    metadata = [("x-request-id", "first-id"), ("x-request-id", "second-id")]
    with holding_server(servicer) as target:
        error = timed_out(target, metadata, 1.0, asynchronous=asynchronous)
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert not error.trailing_metadata()
    assert request_id(error) == "first-id"
    assert servicer.attempts == [("first-id", None)]
