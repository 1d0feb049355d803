"""``KrypkasinoApi`` without metrics (``metrics=None``, as the HTTP tests and library users
build it) does every counted thing without counting: moves, sweeps, illegal moves and the
renewals of a key rotation."""

from __future__ import annotations

from collections import Counter

import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from service.calls import CallInfo
from service.config import ServerConfig
from service.errors import ServiceError
from service.server import build_api
from service.tokens import KeyRing


def test_every_rpc_works_without_metrics() -> None:
    old, new = KeyRing.generate_key_text(), KeyRing.generate_key_text()
    game = build_api(ServerConfig(), KeyRing.parse(old), None).new_game(
        pb.NewGameRequest(config=pb.GameConfig(players=2), seed=5), CallInfo()
    )
    api = build_api(ServerConfig(), KeyRing.parse(f"{new},{old}"), None)
    seat, token = game.view.turn, game.seat_tokens[game.view.turn]
    legal = api.legal_moves(
        pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=token), CallInfo()
    )
    assert legal.state and legal.seat_token  # both renewed under the new key
    other = 1 - seat
    with pytest.raises(ServiceError) as refused:
        api.play(
            pb.PlayRequest(
                state=game.state,
                seat=other,
                seat_token=game.seat_tokens[other],
                move=legal.moves[0].move,
            ),
            CallInfo(),
        )
    assert refused.value.reason == "NOT_YOUR_TURN"
    state = game.state
    kinds: Counter[int] = Counter()
    for _ in range(40):
        view = api.get_view(pb.GetViewRequest(state=state), CallInfo()).view
        seat = view.turn
        move = api.legal_moves(
            pb.LegalMovesRequest(state=state, seat=seat, seat_token=game.seat_tokens[seat]),
            CallInfo(),
        ).moves[0]
        played = api.play(
            pb.PlayRequest(
                state=state, seat=seat, seat_token=game.seat_tokens[seat], move=move.move
            ),
            CallInfo(),
        )
        kinds.update(e.captured.kind for e in played.events if e.HasField("captured"))
        kinds.update(pb.MOVE_KIND_CRAWL for e in played.events if e.HasField("crawled"))
        state = played.state
    # Every counted kind of move was made: crawls, captures and sweeps.
    assert {pb.MOVE_KIND_CRAWL, pb.MOVE_KIND_CAPTURE, pb.MOVE_KIND_SWEEP} <= set(kinds), kinds
    scored = api.score(pb.ScoreRequest(state=state), CallInfo())
    assert not scored.deals and list(scored.totals) == [0, 0]  # the first deal goes on
