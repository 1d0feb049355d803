"""A Hypothesis state machine that plays many games at once on one real server, through
the Python client, keeping every token it has seen, and checks every answer against the
in-process engine given the same configuration, seed and moves.

What it checks (design sections 3-5, K7.7, K7.8, K12-K13, K16):

- NewGame accepts exactly the configurations ``Config.validate`` accepts (K16), and
  refuses the others INVALID_ARGUMENT ``CONFIG_INVALID`` naming flag and rule; a game
  deals what ``open_game`` deals from its seed (a seedless game's seed is read from its
  token, sealed with the test key).
- LegalMoves, Play, Score and GetView answer as the engine does: equal state ids, views,
  events, legal moves and score sheets (protobuf equality), on the current token, on
  another token of the same state (another nonce) and on stale tokens, whose plays fork
  the game (design section 4: a stateless server cannot refuse a replay, and a replayed
  Play gives the same state id). They are asked all through the match, not mostly at
  move 0: a run-ahead compares GetView and LegalMoves at every state it passes through,
  across deal ends, and half the new games start played ahead.
- A move the engine refuses is refused FAILED_PRECONDITION with exactly the refusal
  ``illegal_move_refusal`` makes of the engine's error: reason, rule ID, metadata and
  message (design section 5); one it takes, the server takes.
- A seat token of another seat, of another game, or of a game of an earlier example is
  refused PERMISSION_DENIED ``SEAT_TOKEN_INVALID`` by each of the three RPCs that take
  one, with ``token_seat`` or ``token_game`` saying which (design section 4).
- Every refusal carries one ``ErrorInfo`` with a documented reason, never INTERNAL.

The oracle encodes with the service's own codecs (``codec``, ``view_codec``,
``state_codec``) and builds refusals with its ``illegal_move_refusal``, so this checks
tokens, authorisation, transport, caching, request handling and that the server's Play
path equals the engine's, not the codecs themselves (``test_codec.py`` checks those).

Every draw that depends on the state is an integer with fixed bounds taken modulo the
length, drawn before any early return: a seedless game deals what the server chose, so a
bound taken from the state would differ when Hypothesis replays an example, which it
reports as a flaky strategy.

``FUZZ_SCALE`` multiplies the examples (``tests/sizes.py``); above 1 the matches are
longer too.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import grpc
from cardrules.client import KrypkasinoClient, Reason
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from engine.cards import Card, full_deck
from engine.krypkasino import (
    Config,
    ConfigError,
    IllegalMoveError,
    Move,
    Removal,
    Rules,
    State,
    Teams,
    TieRule,
    legal_moves,
    open_game,
    play,
    score,
    view,
)
from service import codec, state_codec, view_codec
from service.errors import ServiceError
from service.krypkasino_api import illegal_move_refusal
from tests.service.grpc_helpers import Refusal, game_state, refusal_of
from tests.service.server_process import TEST_KEY, ServerProcess
from tests.sizes import fuzz_examples

LONG = fuzz_examples(1) > 1
MAX_DEALS_PER_PLAYER = 12 if LONG else 2
MAX_TARGET = 400 if LONG else 60
MAX_RUN_AHEAD = 800 if LONG else 200
# Moves a new game may be played ahead: two deals of one deck (48 moves each: 52 cards,
# 4 dealt to the table), one of two.
MAX_AHEAD = 100
DOCUMENTED = {reason.value for reason in Reason}
# Seat tokens of the games of earlier examples, mixed into the foreign ones.
EARLIER_KEPT = 500

SETTINGS = settings(
    max_examples=fuzz_examples(40),
    stateful_step_count=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def state_id_of(state: State, game_id: str) -> str:
    payload = state_codec.state_to_proto(state, game_id).SerializeToString(deterministic=True)
    return state_codec.state_id(payload)


def expected_view(state: State, game_id: str, seat: int | None) -> pb.View:
    return view_codec.view_to_proto(view(state, seat), game_id, state_id_of(state, game_id))


def checked_refusal(error: grpc.RpcError) -> Refusal:
    """The refusal, with one ErrorInfo of domain cardrules (``refusal_of``), whose reason
    docs/api.md documents."""
    refusal = refusal_of(error)
    assert refusal.reason in DOCUMENTED, f"undocumented reason {refusal.reason}"
    event(f"refused {refusal.code.name} {refusal.reason}")
    return refusal


def is_valid(config: Config) -> bool:
    try:
        config.validate()
    except ConfigError:
        return False
    return True


@dataclass
class Game:
    game_id: str
    config: Config
    seat_tokens: list[bytes]
    # state id -> (its first token, the engine's state): every state seen of this game.
    states: dict[str, tuple[bytes, State]] = field(default_factory=dict)
    tokens: list[tuple[str, bytes]] = field(default_factory=list)  # every token seen
    current: str = ""

    def add(self, token: bytes, state: State, state_id: str) -> None:
        self.tokens.append((state_id, token))
        self.states.setdefault(state_id, (token, state))


@st.composite
def configs(draw: st.DrawFn) -> Config:
    """Mostly valid configurations, some the K16 checks refuse; ``fast`` ones (2-3
    players, one deck) keep most matches short enough to finish."""
    fast = draw(st.booleans())
    players = draw(st.integers(2, 3 if fast else 6))
    teams = draw(st.sampled_from(list(Teams)))
    flags = {name: draw(st.booleans()) for name in Rules.flag_names()}
    flags["two_player_five_six"] &= players == 2
    flags["single_deck"] |= fast
    rules = Rules(removal=draw(st.sampled_from(list(Removal))), **flags)
    draw_for_deal = draw(st.booleans())
    first_dealer = 0 if draw_for_deal else draw(st.integers(0, players - 1))
    kind = draw(st.sampled_from(["default", "deals", "target", "both"]))
    match_deals = target = None
    if kind == "deals":
        match_deals = players * draw(st.integers(1, MAX_DEALS_PER_PLAYER))
    elif kind == "both":
        match_deals = draw(st.integers(1, 3 * MAX_DEALS_PER_PLAYER))
    if kind in ("target", "both"):
        target = draw(st.integers(1, MAX_TARGET))
    return Config(
        players=players,
        teams=teams,
        rules=rules,
        first_dealer=first_dealer,
        draw_for_deal=draw_for_deal,
        match_deals=match_deals,
        target_score=target,
        tie_rule=draw(st.sampled_from(list(TieRule))),
    )


def random_move(rnd: random.Random, state: State, seat: int) -> Move:
    """A move that is often illegal: a card from the hand (or any card), capturing cards
    of the table (or any cards), or a listed capture less some of its cards."""
    on_turn = state.turn == seat and not state.over
    capturing = [m for m in legal_moves(state, seat) if len(m.captures) > 1] if on_turn else []
    if capturing and rnd.random() < 0.3:
        listed = rnd.choice(capturing)
        kept = rnd.sample(list(listed.captures), rnd.randint(1, len(listed.captures) - 1))
        return Move(listed.card, tuple(sorted(kept)))
    hand = state.hands[seat]
    card = rnd.choice(hand) if hand and rnd.random() < 0.85 else rnd.choice(full_deck(1))
    captures: list[Card] = []
    r = rnd.random()
    if r < 0.5 and state.table:
        captures = rnd.sample(list(state.table), rnd.randint(1, len(state.table)))
    elif r < 0.6:
        captures = [rnd.choice(full_deck(1)) for _ in range(rnd.randint(1, 3))]
    return Move(card, tuple(sorted(captures)))


def index(data: st.DataObject, n: int) -> int:
    """An index below ``n``, drawn with fixed bounds (see the module's docstring)."""
    return data.draw(st.integers(0, 2**16)) % n


class ServiceMachine(RuleBasedStateMachine):
    def __init__(self, client: KrypkasinoClient, earlier: list[bytes]) -> None:
        super().__init__()
        self.client = client
        self.earlier = earlier
        self.games: list[Game] = []

    # -- checks -----------------------------------------------------------------------

    def _new_game(self, config: Config, seed: int | None) -> Game | None:
        request = pb.NewGameRequest(config=codec.config_to_proto(config), seed=seed)
        valid = is_valid(config)
        try:
            response = self.client.new_game(request)
        except grpc.RpcError as error:
            refusal = checked_refusal(error)
            assert not valid, f"valid config refused: {refusal} {config}"
            assert refusal.code is grpc.StatusCode.INVALID_ARGUMENT, refusal
            assert refusal.reason == "CONFIG_INVALID", refusal
            assert "flag" in refusal.metadata and "rule" in refusal.metadata, refusal
            return None
        assert valid, f"invalid config accepted: {config}"
        if seed is None:
            seed = game_state(response.state, TEST_KEY).seed
        state, events = open_game(config, seed=seed)
        assert list(response.events) == codec.events_to_proto(events)
        assert response.view == expected_view(state, response.game_id, None)
        assert len(set(response.seat_tokens)) == len(response.seat_tokens) == config.players
        game = Game(response.game_id, config, list(response.seat_tokens))
        game.add(response.state, state, response.view.state_id)
        game.current = response.view.state_id
        event(f"game of {config.players} players")
        return game

    def _play(
        self, game: Game, state_id: str, token: bytes, state: State, seat: int, move: Move
    ) -> str | None:
        """Play ``move`` on the server and in the engine: the new state's id, or None when
        both refuse it, the server with the refusal made of the engine's error."""
        try:
            after, events = play(state, seat, move)
        except IllegalMoveError as error:
            expected: ServiceError | None = illegal_move_refusal(error, state, seat)
        else:
            expected = None
        try:
            response = self.client.play(
                state=token,
                seat=seat,
                seat_token=game.seat_tokens[seat],
                move=codec.move_to_proto(move),
            )
        except grpc.RpcError as error:
            refusal = checked_refusal(error)
            assert expected is not None, f"legal move {move} refused: {refusal}"
            got = (refusal.code, refusal.reason, refusal.metadata, refusal.message)
            wanted = (expected.code, expected.reason, dict(expected.metadata), expected.message)
            assert got == wanted
            return None
        assert expected is None, f"illegal move {move} accepted on {state_id}: {expected}"
        new_id = state_id_of(after, game.game_id)
        assert response.view.state_id == new_id
        assert list(response.events) == codec.events_to_proto(events)
        assert response.view == expected_view(after, game.game_id, seat)
        if new_id in game.states:
            event("a play reached a state seen before")
        game.add(response.state, after, new_id)
        if after.over:
            event("a match ended")
        return new_id

    def _legal(self, game: Game, token: bytes, state: State, seat: int) -> list[Move]:
        """K7.7: the seat's legal moves in the engine's order, none off turn; the moves the
        server listed."""
        response = self.client.legal_moves(
            state=token, seat=seat, seat_token=game.seat_tokens[seat]
        )
        assert list(response.moves) == codec.legal_moves_to_proto(state, legal_moves(state, seat))
        # One key seals and opens, so nothing is renewed.
        assert not response.HasField("state") and not response.seat_token
        if not state.over and seat == state.turn:
            assert response.moves
        return [codec.move_from_proto(listed.move) for listed in response.moves]

    def _view(
        self, game: Game, state_id: str, token: bytes, state: State, seat: int | None
    ) -> None:
        """Design section 3: the public view, or a seat's with its hand."""
        if seat is None:
            response = self.client.get_view(state=token)
        else:
            response = self.client.get_view(
                state=token, seat=seat, seat_token=game.seat_tokens[seat]
            )
        assert response.view.state_id == state_id
        assert response.view == expected_view(state, game.game_id, seat)
        assert not response.HasField("state")

    def _compare(self, game: Game, rnd: random.Random) -> list[Move]:
        """GetView (of a random seat, or the public one) and LegalMoves (of the seat on
        turn, at times of another) of the current state, as the engine answers them; the
        moves listed for the seat on turn (none when the match is over)."""
        token, state = game.states[game.current]
        seat = rnd.randrange(state.players + 1)
        self._view(game, game.current, token, state, seat if seat < state.players else None)
        if rnd.random() < 0.2:
            self._legal(game, token, state, rnd.randrange(state.players))
        return self._legal(game, token, state, state.turn)

    def _run_ahead(self, game: Game, rnd: random.Random, count: int) -> None:
        """Up to ``count`` moves the server lists, on the current token, until the match
        ends; the server's answers are compared with the engine's at every state on the way
        (``_compare``, and Play's), so across whole deals and their ends, not only where
        the other rules' picks land (a mutation review: the asks fell nearly all on move 0
        and none where LegalMoves dropped a move on a move number out of seven)."""
        for _ in range(count):
            listed = self._compare(game, rnd)
            token, state = game.states[game.current]
            if state.over:
                return
            new_id = self._play(game, game.current, token, state, state.turn, rnd.choice(listed))
            assert new_id is not None
            game.current = new_id
        self._compare(game, rnd)

    def _pick(self, data: st.DataObject, stale_bias: float = 0.3) -> tuple[Game, str, bytes, State]:
        """A game and one of its tokens: a stale one at times, else one of the current
        state's tokens."""
        game = data.draw(st.sampled_from(self.games))
        stale = data.draw(st.floats(0, 1)) < stale_bias
        i = data.draw(st.integers(0, 2**16))
        j = data.draw(st.integers(0, 2**16))
        if stale and len(game.tokens) > 1:
            state_id, token = game.tokens[i % len(game.tokens)]
        else:
            state_id = game.current
            same = [t for s, t in game.tokens if s == state_id]
            token = same[j % len(same)]
        return game, state_id, token, game.states[state_id][1]

    # -- rules --------------------------------------------------------------------------

    @initialize(config=configs(), seed=st.integers(0, 2**64 - 1), ahead=st.integers(0, 2**32))
    def first_game(self, config: Config, seed: int, ahead: int) -> None:
        self.new_game(config, seed, seeded=True, ahead=ahead)

    @rule(
        config=configs(),
        seed=st.integers(0, 2**64 - 1),
        seeded=st.booleans(),
        ahead=st.integers(0, 2**32),
    )
    def new_game(self, config: Config, seed: int, seeded: bool, ahead: int) -> None:
        """A new game; half of them played ahead first (``_run_ahead``, ``MAX_AHEAD``), so
        that the rules which pick a game's current state find it mid-deal or in a later
        deal, not only at move 0."""
        game = self._new_game(config, seed if seeded else None)
        if game is not None:
            self.games.append(game)
            rnd = random.Random(ahead)
            if rnd.random() < 0.5:
                self._run_ahead(game, rnd, rnd.randint(1, MAX_AHEAD))

    @rule(data=st.data())
    def new_game_out_of_bounds(self, data: st.DataObject) -> None:
        """Player counts, first dealers and match lengths outside the rules' bounds
        (K3.1, K4.2, K13.2, K16): refused unless ``Config.validate`` takes them."""
        config = Config(
            players=data.draw(st.integers(0, 8)),
            teams=data.draw(st.sampled_from(list(Teams))),
            rules=Rules(
                two_player_five_six=data.draw(st.booleans()),
                four_four=data.draw(st.booleans()),
                single_deck=data.draw(st.booleans()),
            ),
            match_deals=data.draw(st.one_of(st.none(), st.integers(1, 250))),
            target_score=data.draw(st.one_of(st.none(), st.integers(1, 500))),
            first_dealer=data.draw(st.integers(0, 7)),
        )
        self._new_game(config, 1)

    @precondition(lambda self: self.games)
    @rule(data=st.data())
    def ask_legal_moves(self, data: st.DataObject) -> None:
        """K7.7: the seat's legal moves in the engine's order, none off turn."""
        game, _, token, state = self._pick(data)
        self._legal(game, token, state, index(data, game.config.players))

    @precondition(lambda self: self.games)
    @rule(data=st.data())
    def play_listed(self, data: st.DataObject) -> None:
        """K7.8: a move LegalMoves lists is accepted, on the current token or a stale one
        (which forks the game)."""
        game, state_id, token, state = self._pick(data)
        raw_index = data.draw(st.integers(0, 2**16))
        if state.over:
            return
        seat = state.turn
        listed = self._legal(game, token, state, seat)
        new_id = self._play(game, state_id, token, state, seat, listed[raw_index % len(listed)])
        assert new_id is not None
        if state_id == game.current:
            game.current = new_id
        else:
            event("a stale token forked a game")

    @precondition(lambda self: self.games)
    @rule(data=st.data(), count=st.integers(5, MAX_RUN_AHEAD))
    def run_ahead(self, data: st.DataObject, count: int) -> None:
        """Many listed moves on the current token, to reach deal and match ends, every
        answer on the way compared (``_run_ahead``)."""
        game = data.draw(st.sampled_from(self.games))
        self._run_ahead(game, random.Random(data.draw(st.integers(0, 2**32))), count)

    @precondition(lambda self: self.games)
    @rule(data=st.data())
    def play_random(self, data: st.DataObject) -> None:
        """A move seldom listed, by any seat: refused as the engine refuses it (design
        section 5), or taken if the engine takes it."""
        game, state_id, token, state = self._pick(data)
        seat = index(data, game.config.players)
        rnd = random.Random(data.draw(st.integers(0, 2**32)))
        new_id = self._play(game, state_id, token, state, seat, random_move(rnd, state, seat))
        if new_id is not None and state_id == game.current:
            game.current = new_id

    @precondition(lambda self: self.games)
    @rule(data=st.data(), call=st.sampled_from(["legal_moves", "play", "get_view"]))
    def foreign_seat_token(self, data: st.DataObject, call: str) -> None:
        """Design section 4: another seat's token, another game's or an earlier example's
        is refused PERMISSION_DENIED SEAT_TOKEN_INVALID, even with a legal move."""
        game, _, token, state = self._pick(data)
        seat = index(data, game.config.players)
        pick = data.draw(st.integers(0, 2**20))
        choices: list[tuple[str, int | None, bytes]] = [
            ("another seat", s, t) for s, t in enumerate(game.seat_tokens) if s != seat
        ]
        choices += [
            ("another game", None, t)
            for other in self.games
            if other.game_id != game.game_id
            for t in other.seat_tokens
        ]
        choices += [("an earlier example", None, t) for t in self.earlier[-50:]]
        kind, token_seat, foreign = choices[pick % len(choices)]
        try:
            if call == "legal_moves":
                self.client.legal_moves(state=token, seat=seat, seat_token=foreign)
            elif call == "get_view":
                self.client.get_view(state=token, seat=seat, seat_token=foreign)
            else:
                move = legal_moves(state, state.turn)[0] if not state.over else Move(Card(0))
                self.client.play(
                    state=token, seat=seat, seat_token=foreign, move=codec.move_to_proto(move)
                )
        except grpc.RpcError as error:
            refusal = checked_refusal(error)
            assert refusal.code is grpc.StatusCode.PERMISSION_DENIED, refusal
            assert refusal.reason == "SEAT_TOKEN_INVALID", refusal
            assert refusal.metadata.get("seat") == str(seat), refusal
            if token_seat is not None:
                assert refusal.metadata.get("token_seat") == str(token_seat), refusal
                assert "token_game" not in refusal.metadata, refusal
            else:
                assert "token_seat" not in refusal.metadata, refusal
                assert refusal.metadata.get("token_game") == "other", refusal
            event(f"{call} refused a seat token of {kind}")
            return
        raise AssertionError(f"{call} took a seat token of {kind}")

    @precondition(lambda self: self.games)
    @rule(data=st.data(), with_seat=st.booleans())
    def get_view(self, data: st.DataObject, with_seat: bool) -> None:
        """Design section 3: the public view, or a seat's with its hand."""
        game, state_id, token, state = self._pick(data)
        seat = index(data, game.config.players) if with_seat else None
        self._view(game, state_id, token, state, seat)

    @precondition(lambda self: self.games)
    @rule(data=st.data())
    def ask_score(self, data: st.DataObject) -> None:
        """K12-K13: the engine's score sheet, mid-match or over."""
        _, _, token, state = self._pick(data)
        assert self.client.score(state=token) == codec.score_to_proto(score(state))

    @precondition(lambda self: self.games)
    @rule(data=st.data())
    def replay(self, data: st.DataObject) -> None:
        """Design section 4: the same move on the same token twice gives the same state id
        (a Play is a pure function of its request)."""
        game, state_id, token, state = self._pick(data, stale_bias=0.8)
        if state.over:
            return
        move = legal_moves(state, state.turn)[0]
        first = self._play(game, state_id, token, state, state.turn, move)
        assert first is not None
        assert self._play(game, state_id, token, state, state.turn, move) == first

    @invariant()
    def public_view_of_the_newest_game(self) -> None:
        if self.games:
            game = self.games[-1]
            token, state = game.states[game.current]
            response = self.client.get_view(state=token)
            assert response.view == expected_view(state, game.game_id, None)

    def teardown(self) -> None:
        self.earlier += [t for game in self.games for t in game.seat_tokens]
        del self.earlier[:-EARLIER_KEPT]


def test_the_server_answers_as_the_engine_across_games_and_stale_tokens(
    server: ServerProcess,
) -> None:
    earlier: list[bytes] = []
    with KrypkasinoClient(server.target, timeout=30) as client:

        class OnTheSessionServer(ServiceMachine):
            def __init__(self) -> None:
                super().__init__(client, earlier)

        run_state_machine_as_test(OnTheSessionServer, settings=SETTINGS)
