"""What LegalMoves says a move does is what Play does with it (K8.3, K9.1, K2.4, K12.1).

``LegalMove.kind`` and ``LegalMove.card_points`` are worked out by the codec
(``service/codec.py``, ``_fill_legal_move``) from the table and the move, apart
from the engine's execution of the move, and the conformance suite's engine
driver calls the same codec function: a rule that changes what a move sweeps or
what a card is worth (a new K16 or house flag) could leave the annotations
behind while every other test passes. Here the service's own API
(``KrypkasinoApi``, in-process, with sealed tokens) plays real random matches;
at random positions, and at every position where some listed move sweeps, every
move LegalMoves lists is played from the same token (tokens are stateless, so a
position branches into all its moves) and its Play is held to its annotation:

- the first event is ``crawled`` for a crawl, else ``captured`` with the move's
  cards and the same kind, conceded by the previous seat exactly for a sweep (K9.1);
- the mover's face-up markers grow by the kind's markers (K8.3), or, when the move
  ends the deal, the deal's ``sweeps_made`` are 5 per marker of the deal's sweeps;
- ``card_points`` is what the engine's deal scoring (``score_deal``, K12.1) counts
  for the cards the event says were taken;
- the greedy policy's ``points_taken`` (``engine/krypkasino/policies.py``), which works
  out card and sweep points apart from the play as well, counts what the Play took;
- at every deal end, each seat's ``card_points`` in the deal's score sheet is the sum
  of the annotations of the moves it played, plus the cards collected (K11.2) for the
  recipient.

Configurations are drawn as ``random_config`` draws them (every player count and team
mode, any valid combination of the flags); ``tests.sizes.random_games()`` / 10 games.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pytest
from cardrules.cards.v1 import cards_pb2
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from engine.cards import Card, card_str
from engine.krypkasino import Config
from engine.krypkasino.policies import points_taken
from engine.krypkasino.scoring import score_deal
from service import codec
from service.calls import CallInfo
from service.config import ServerConfig
from service.server import build_api
from service.tokens import KeyRing
from tests.engine.krypkasino.configs import config_label, random_config
from tests.sizes import first_random_seed, random_games

API = build_api(ServerConfig(), KeyRing.parse(KeyRing.generate_key_text()), None)
# Seeds apart from test_random_play's, so these are other configurations and deals.
FIRST_SEED = 100_000 + first_random_seed()
GAMES = [random_config(FIRST_SEED + i) for i in range(max(2, random_games() // 10))]
# One position in this many is branched into all its moves, besides every sweep position.
EXPLORE_ONE_IN = 4
MARKERS = {
    pb.MOVE_KIND_CRAWL: 0,
    pb.MOVE_KIND_CAPTURE: 0,
    pb.MOVE_KIND_SWEEP: 1,
    pb.MOVE_KIND_DOUBLE_SWEEP: 2,
}
SWEEPS = (pb.MOVE_KIND_SWEEP, pb.MOVE_KIND_DOUBLE_SWEEP)
SWEEP_POINTS = 5


def _cards(msgs: Sequence[cards_pb2.Card]) -> list[Card]:
    return [codec.card_from_proto(msg, "card") for msg in msgs]


def _scored_points(config: Config, seat: int, taken: Sequence[Card]) -> int:
    """K12.1: the card points the engine's deal scoring counts for ``taken`` in ``seat``'s
    pile, under ``config``'s rules; the scoring a rule flag changes, and so the truth
    ``LegalMove.card_points`` must follow."""
    piles = [tuple(taken) if s == seat else () for s in range(config.players)]
    markers = [()] * config.players
    return score_deal(config, piles, markers, seat, None)[seat].card_points


@dataclass
class Deal:
    """The annotations of the moves played so far in the current deal, seat by seat."""

    players: int
    points: list[int] = field(default_factory=list)
    markers: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.points = [0] * self.players
        self.markers = [0] * self.players

    def add(self, seat: int, legal: pb.LegalMove) -> None:
        self.points[seat] += legal.card_points
        self.markers[seat] += MARKERS[legal.kind]


@dataclass
class Game:
    """The service's state of a match being played, and what it has met."""

    config: Config
    state: bytes
    seat_tokens: list[bytes]
    view: pb.View
    deal: Deal
    kinds: Counter[str] = field(default_factory=Counter)
    explored: int = 0


def _start(config: Config, seed: int) -> Game:
    # NewGame refuses a first dealer beside draw_for_deal (K4.2), which Config allows.
    if config.draw_for_deal:
        config = replace(config, first_dealer=0)
    started = API.new_game(
        pb.NewGameRequest(config=codec.config_to_proto(config), seed=seed), CallInfo()
    )
    return Game(
        config, started.state, list(started.seat_tokens), started.view, Deal(config.players)
    )


def _listed(game: Game, seat: int) -> list[pb.LegalMove]:
    answer = API.legal_moves(
        pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=game.seat_tokens[seat]),
        CallInfo(),
    )
    return list(answer.moves)


def _play(game: Game, seat: int, legal: pb.LegalMove) -> pb.PlayResponse:
    request = pb.PlayRequest(
        state=game.state, seat=seat, seat_token=game.seat_tokens[seat], move=legal.move
    )
    return API.play(request, CallInfo())


def _deal_ended(played: pb.PlayResponse) -> pb.DealEnded | None:
    ended = [e.deal_ended for e in played.events if e.WhichOneof("kind") == "deal_ended"]
    return ended[0] if ended else None


def _check_move(game: Game, seat: int, legal: pb.LegalMove, played: pb.PlayResponse) -> None:
    """The Play's first event and the mover's markers are the LegalMove's kind; its
    card points are what the engine's scoring counts for the cards taken."""
    table = " ".join(card_str(card) for card in _cards(game.view.table))
    where = f"seat {seat} played {codec.move_from_proto(legal.move)} to table {table}"
    kind = pb.MoveKind.Name(legal.kind)
    first = played.events[0]
    if legal.kind == pb.MOVE_KIND_CRAWL:
        assert first.WhichOneof("kind") == "crawled", f"K8.2: {kind} announced; {where}"
        assert (first.crawled.seat, first.crawled.card) == (seat, legal.move.card), where
        assert legal.card_points == 0, f"K8.2: a crawl takes no points; {where}"
    else:
        assert first.WhichOneof("kind") == "captured", f"K8.3: {kind} announced; {where}"
        captured = first.captured
        played_kind = pb.MoveKind.Name(captured.kind)
        assert captured.kind == legal.kind, f"K8.3: {kind} announced, {played_kind} played; {where}"
        assert captured.seat == seat and captured.card == legal.move.card, where
        assert sorted(_cards(captured.captures)) == sorted(_cards(legal.move.captures)), where
        assert captured.HasField("conceded_by") == (legal.kind in SWEEPS), f"K9.1: {where}"
        taken = [codec.card_from_proto(captured.card, "card"), *_cards(captured.captures)]
        scored = _scored_points(game.config, seat, taken)
        assert legal.card_points == scored, (
            f"K2.4/K12.1: {legal.card_points} card points announced, the deal scoring counts "
            f"{scored} for the cards taken; {where}"
        )
    _check_greedy_points(game, seat, legal, played)
    ended = _deal_ended(played)
    if ended is not None:
        _check_deal_end(game, seat, legal, ended)
    else:
        before, after = game.view.markers[seat].cards, played.view.markers[seat].cards
        assert len(after) - len(before) == MARKERS[legal.kind], f"K8.3 markers: {kind}; {where}"


def _check_greedy_points(
    game: Game, seat: int, legal: pb.LegalMove, played: pb.PlayResponse
) -> None:
    """The greedy policy's ``points_taken`` works out the same two things apart from the
    engine's play (K2.4 card points, K9.1 5 per marker): it must count what was played."""
    first = played.events[0]
    if first.WhichOneof("kind") == "captured":
        taken = [codec.card_from_proto(first.captured.card, "card")]
        taken += _cards(first.captured.captures)
        marked = MARKERS[first.captured.kind]
    else:
        taken, marked = [], 0
    scored = _scored_points(game.config, seat, taken) if taken else 0
    move = codec.move_from_proto(legal.move)
    greedy = points_taken(_cards(game.view.table), move, game.config.rules)
    assert greedy == scored + SWEEP_POINTS * marked, (
        f"policies.points_taken counts {greedy} for {move}, the play {scored} card points "
        f"and {marked} markers (K2.4, K9.1)"
    )


def _check_deal_end(game: Game, seat: int, last: pb.LegalMove, ended: pb.DealEnded) -> None:
    """K12.1 per seat: the card points the deal's sheet scores are the announced points of
    the moves the seat played, and the collected cards for the recipient (K11.2); the sweep
    points are 5 per marker of the announced kinds."""
    points, markers = list(game.deal.points), list(game.deal.markers)
    points[seat] += last.card_points
    markers[seat] += MARKERS[last.kind]
    recipient = ended.recipient
    points[recipient] += _scored_points(game.config, recipient, _cards(ended.collected))
    sheet = ended.score.seats
    assert [s.card_points for s in sheet] == points, (
        f"K12.1: the deal scored card points {[s.card_points for s in sheet]}, the moves' "
        f"LegalMove.card_points add up to {points} (collected cards included)"
    )
    assert [s.sweeps_made for s in sheet] == [SWEEP_POINTS * m for m in markers], (
        f"K9.1: the deal scored sweeps {[s.sweeps_made for s in sheet]}, the moves' "
        f"LegalMove.kind make {markers} markers"
    )


def _explore(game: Game, seat: int, listed: list[pb.LegalMove]) -> list[pb.PlayResponse]:
    """Every listed move played from the same token, each checked."""
    answers = []
    for legal in listed:
        played = _play(game, seat, legal)
        _check_move(game, seat, legal, played)
        game.kinds[pb.MoveKind.Name(legal.kind)] += 1
        answers.append(played)
    game.explored += 1
    return answers


def _play_match(config: Config, seed: int) -> Game:
    """One random match through the API, positions branched as the module says."""
    rng = random.Random(f"annotations-{seed}")
    game = _start(config, seed)
    while not game.view.game_over:
        seat = game.view.turn
        listed = _listed(game, seat)
        assert listed, "K7.8: the mover always has a legal move"
        at = rng.randrange(len(listed))
        sweeping = any(legal.kind in SWEEPS for legal in listed)
        if sweeping or rng.randrange(EXPLORE_ONE_IN) == 0:
            played = _explore(game, seat, listed)[at]
        else:
            played = _play(game, seat, listed[at])
            _check_move(game, seat, listed[at], played)
        if _deal_ended(played) is None:
            game.deal.add(seat, listed[at])
        else:
            game.deal = Deal(config.players)
        game.state, game.view = played.state, played.view
    return game


@pytest.mark.parametrize(
    ("config", "seed"),
    [(config, FIRST_SEED + i) for i, config in enumerate(GAMES)],
    ids=[f"{FIRST_SEED + i}-{config_label(config)}" for i, config in enumerate(GAMES)],
)
def test_every_listed_move_does_what_legal_moves_says(config: Config, seed: int) -> None:
    game = _play_match(config, seed)
    assert game.explored >= 1
    assert game.kinds["MOVE_KIND_CRAWL"] and game.kinds["MOVE_KIND_CAPTURE"], game.kinds
