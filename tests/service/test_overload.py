"""An overloaded server (design section 6): calls queued past their deadline are not served.

A flood of calls with a short deadline against a real ``cardrules serve``
queues them in the server longer than their callers wait. Those the service
reaches after their deadline are refused without the rules work, logged and
counted as ``DeadlineExceeded``, and get no answer (grpc ends them itself),
so grpc logs no error for an answer to an ended call.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import grpc
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from tests.service.grpc_helpers import connect
from tests.service.metrics_helpers import metric_samples
from tests.service.server_process import ServerProcess, free_port, running

PLAY = "/cardrules.krypkasino.v1.KrypkasinoService/Play"
# Far more work than the server does within the deadline: about 1 ms of server CPU
# per Play on the development machine, 400 calls in flight, 50 ms to answer each.
IN_FLIGHT = 400
DEADLINE_SECONDS = 0.05
FLOOD_SECONDS = 2.0


def play_request(target: str) -> bytes:
    """A legal first move of a new 2-player game, as request bytes."""
    with connect(target) as stub:
        game = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=3))
        seat = game.view.turn
        moves = stub.LegalMoves(
            pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=game.seat_tokens[seat])
        )
        return pb.PlayRequest(
            state=game.state,
            seat=seat,
            seat_token=game.seat_tokens[seat],
            move=moves.moves[0].move,
        ).SerializeToString()


async def flood(target: str, request: bytes) -> dict[str, grpc.StatusCode]:
    """``IN_FLIGHT`` callers sending ``request`` for ``FLOOD_SECONDS``: each call's code by its
    request id."""
    codes: dict[str, grpc.StatusCode] = {}
    async with grpc.aio.insecure_channel(target) as channel:
        play: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(PLAY)
        stop = asyncio.get_running_loop().time() + FLOOD_SECONDS

        async def caller() -> None:
            while asyncio.get_running_loop().time() < stop:
                request_id = uuid.uuid4().hex
                try:
                    await play(
                        request,
                        timeout=DEADLINE_SECONDS,
                        metadata=(("x-request-id", request_id),),
                    )
                    codes[request_id] = grpc.StatusCode.OK
                except grpc.aio.AioRpcError as error:
                    codes[request_id] = error.code()

        await asyncio.gather(*(caller() for _ in range(IN_FLIGHT)))
    return codes


def handled(server: ServerProcess, code: str) -> float:
    return metric_samples(server.metrics_url)[
        (
            "grpc_server_handled_total",
            frozenset(
                {
                    ("grpc_type", "unary"),
                    ("grpc_service", "cardrules.krypkasino.v1.KrypkasinoService"),
                    ("grpc_method", "Play"),
                    ("grpc_code", code),
                }
            ),
        )
    ]


def test_calls_queued_past_their_deadline_are_refused_unserved_and_counted():
    with running(("--metrics-port", str(free_port()))) as server:
        request = play_request(server.target)
        codes = asyncio.run(flood(server.target, request))
        # The server serves again once the flood is over.
        with connect(server.target) as stub:
            stub.Play(pb.PlayRequest.FromString(request), timeout=10)
        late = [
            line
            for line in server.log_events("request")
            if str(line["method"]).endswith("/Play") and line["code"] == "DeadlineExceeded"
        ]
        assert late, f"no call was queued past its deadline: {Counter(codes.values())}"
        assert handled(server, "DeadlineExceeded") == len(late)
    for line in late:
        assert line["reason"] == "DEADLINE_EXCEEDED", line
        # Its caller had stopped waiting: the call ended DEADLINE_EXCEEDED there too.
        assert codes[str(line["request_id"])] == grpc.StatusCode.DEADLINE_EXCEEDED, line
    # Most were refused before the rules work began: their state token was never opened.
    assert any(line["game_id"] is None for line in late), late[:3]
    # No answer went to a call grpc had already ended (it logs an error for each).
    assert not [line for line in server.logs if line.get("level") == "error"]
