"""No response tells a seat anything hidden from it, over the wire (design sections 3-4, K14).

Seeded random matches of 2 to 6 players run on a real server while the same
moves run in-process: the server is deterministic given the seed, so the test
knows every hand and the stock at every moment. Every response a seat gets
(NewGame, LegalMoves, Play, GetView with its token, the public GetView,
Score) is held to this rule:

- ``view.hand`` is exactly the viewer's hand, empty in the public view; hand,
  stock and pile sizes are exact;
- ``view.last_move`` shows only the cards of the match's last move;
- every other field that lists cards shows, as a multiset, only cards that are
  public at that moment: the table, the set-aside pile, the sweep markers, and
  the cards that this response's own events reveal (the card played and the
  cards captured, the crawled card, the dealt table cards, the cards set aside,
  the leftovers collected, the draw for deal). Twins share a code (K1.2), so a
  hidden card whose twin is public cannot be told apart and is not a leak; any
  other card of another seat's hand or of the stock is.

Card fields are found by walking the message descriptors, so a card field
added later is checked too (it fails until it is classified here).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import hypothesis
import pytest
from cardrules.cards.v1 import cards_pb2
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf.message import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.cards import Card, cards_str
from engine.krypkasino import (
    Config,
    ConfigError,
    Removal,
    Rules,
    State,
    Teams,
    TieRule,
    legal_moves,
    open_game,
    play,
    score,
    sweep_ranks,
)
from engine.krypkasino.events import (
    Captured,
    CardsSetAside,
    Crawled,
    DealEnded,
    DealerDrawn,
    DistributionDealt,
    Event,
)
from service import codec
from service.tokens import KeyRing, StateSealer
from tests.service.grpc_helpers import Stub, card_code, card_proto, move_proto
from tests.service.server_process import TEST_KEY
from tests.sizes import fuzz_examples

CARD = cards_pb2.Card.DESCRIPTOR.full_name
VIEW_PUBLIC = frozenset({"table", "set_aside", "markers.cards"})
# The last move was played in front of everyone, but its cards are public only there:
# its captures may be in a pile now, so they do not widen what other fields may show.
VIEW_LAST_MOVE = frozenset(
    {"last_move.crawled.card", "last_move.captured.card", "last_move.captured.captures"}
)
EVENT_PUBLIC = frozenset(
    {
        "crawled.card",
        "captured.card",
        "captured.captures",
        "distribution_dealt.table",
        "cards_set_aside.cards",
        "deal_ended.collected",
        "dealer_drawn.cards",
    }
)


# -- the checks ---------------------------------------------------------------------


def card_fields(message: Message, prefix: str = "") -> dict[str, Counter[Card]]:
    """Every card in ``message``, by field path without indices (``markers.cards``)."""
    found: dict[str, Counter[Card]] = {}
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        path = prefix + field.name
        items = list(value) if field.is_repeated else [value]
        if field.message_type.full_name == CARD:
            found.setdefault(path, Counter()).update(card_code(item) for item in items)
            continue
        for item in items:
            for sub_path, cards in card_fields(item, path + ".").items():
                found.setdefault(sub_path, Counter()).update(cards)
    return found


def revealed(events: Iterable[Event]) -> Counter[Card]:
    """The cards the engine's events show everyone (they carry only public facts)."""
    cards: Counter[Card] = Counter()
    for event in events:
        match event:
            case Crawled():
                cards[event.card] += 1
            case Captured():
                cards[event.card] += 1
                cards.update(event.captures)
            case DistributionDealt():
                cards.update(event.table)
            case CardsSetAside():
                cards.update(event.cards)
            case DealEnded():
                cards.update(event.collected)
            case DealerDrawn():
                cards.update(card for _, card in event.draws)
    return cards


def public_cards(state: State, events: Sequence[Event] = ()) -> Counter[Card]:
    """What everyone may see now: table, set-aside pile, markers, and what ``events`` reveal."""
    pool = Counter(state.table) + Counter(state.set_aside) + revealed(events)
    for markers in state.markers:
        pool.update(markers)
    return pool


def hidden_cards(state: State, seat: int | None) -> Counter[Card]:
    """What ``seat`` must not see: the stock and every other hand (every hand for None)."""
    hidden = Counter(state.stock)
    for other, hand in enumerate(state.hands):
        if other != seat:
            hidden.update(hand)
    return hidden


def assert_public(
    path: str, shown: Counter[Card], pool: Counter[Card], hidden: Counter[Card]
) -> None:
    excess = shown - pool
    assert not excess, (
        f"{path} shows {cards_str(sorted(excess.elements()))}, which are not public; "
        f"hidden from the viewer among them: {cards_str(sorted((excess & hidden).elements()))}"
    )


def check_view(view: pb.View, state: State, seat: int | None, events: Sequence[Event] = ()) -> None:
    """The view of ``seat`` (None: public) shows its own hand and nothing else hidden."""
    assert view.HasField("seat") == (seat is not None)
    if seat is not None:
        assert view.seat == seat
    own = sorted(state.hands[seat] if seat is not None else ())
    shown_hand = [card_code(c) for c in view.hand]
    assert shown_hand == own, (
        f"view.hand shows {cards_str(shown_hand)}, not the viewer's hand {cards_str(own)}"
    )
    # The privacy of the other card fields first: a hidden card in the table must be
    # caught as a leak, not only as a table that differs from the engine's.
    pool, hidden = public_cards(state, events), hidden_cards(state, seat)
    last_move = revealed([state.last_move] if state.last_move else [])
    for path, shown in card_fields(view).items():
        if path == "hand":
            continue
        if path in VIEW_LAST_MOVE:
            assert_public(f"view.{path}", shown, last_move, hidden)
            continue
        assert path in VIEW_PUBLIC, f"unclassified card field View.{path}"
        assert_public(f"view.{path}", shown, pool, hidden)
    assert list(view.hand_sizes) == [len(hand) for hand in state.hands]
    assert view.stock_size == len(state.stock)
    assert list(view.pile_sizes) == [len(pile) for pile in state.piles]
    assert [card_code(c) for c in view.table] == list(state.table)
    assert [r - 1 for r in view.sweep_ranks] == list(sweep_ranks(state.table, state.config.rules))
    assert view.move_number == state.move_number
    assert view.game_over == state.over


def check_events(
    messages: Sequence[pb.Event], events: Sequence[Event], state: State, seat: int | None
) -> None:
    """Response events: the engine's kinds, and only cards public after them."""
    assert [m.WhichOneof("kind") for m in messages] == [_kind(e) for e in events]
    pool, hidden = public_cards(state, events), hidden_cards(state, seat)
    shown: dict[str, Counter[Card]] = {}
    for message in messages:
        for path, cards in card_fields(message).items():
            shown.setdefault(path, Counter()).update(cards)
    for path, cards in shown.items():
        assert path in EVENT_PUBLIC, f"unclassified card field Event.{path}"
        assert_public(f"events.{path}", cards, pool, hidden)


def _kind(event: Event) -> str:
    """The ``Event.kind`` oneof member of an engine event: its class name in snake case."""
    name = type(event).__name__
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


def check_legal_moves(response: pb.LegalMovesResponse, state: State, seat: int) -> None:
    """Only the asking seat's own options: its hand's cards and table cards (K7.7)."""
    assert [m.move for m in response.moves] == [move_proto(m) for m in legal_moves(state, seat)]
    fields = card_fields(response)
    assert set(fields) <= {"moves.move.card", "moves.move.captures"}, set(fields)
    for legal in response.moves:
        assert card_code(legal.move.card) in state.hands[seat]
        captures = Counter(card_code(c) for c in legal.move.captures)
        assert_public("moves.move.captures", captures, Counter(state.table), Counter())


def check_score(response: pb.ScoreResponse, state: State) -> None:
    assert card_fields(response) == {}
    sheet = score(state)
    assert (list(response.totals), response.game_over) == (list(sheet.totals), sheet.over)
    assert list(response.winners) == list(sheet.winners)


# -- random matches over the wire ------------------------------------------------------


def config_for(players: int, data: st.DataObject) -> tuple[Config, pb.GameConfig]:
    """A random valid configuration of the K16 variants, ending after one or a few deals."""
    draw = data.draw
    teams = [Teams.INDIVIDUAL]
    if players in (4, 6):
        teams.append(Teams.PAIRS)
    if players == 6:
        teams.append(Teams.TRIOS)
    # One deck halves a match's length; 5 players can only play with two (K5.2).
    single = players != 5 and draw(st.integers(0, 3), label="single deck") > 0
    rules = Rules(
        single_deck=single,
        two_player_five_six=players == 2 and not single and draw(st.booleans(), label="5-6"),
        four_four=players == 5 and draw(st.booleans(), label="four_four"),
        last_capture_point=draw(st.booleans(), label="last_capture_point"),
        removal=draw(st.sampled_from(list(Removal)), label="removal"),
        no_forced_sweep=draw(st.booleans(), label="no_forced_sweep"),
        court_cards_rank_only=draw(st.booleans(), label="court_cards_rank_only"),
        must_capture_if_able=draw(st.booleans(), label="must_capture_if_able"),
        nordic_scoring=draw(st.booleans(), label="nordic_scoring"),
        bordstabbe=draw(st.booleans(), label="bordstabbe"),
    )
    drawn = draw(st.booleans(), label="draw for deal")
    config = Config(
        players=players,
        teams=draw(st.sampled_from(teams), label="teams"),
        rules=rules,
        # K4.2: NewGame refuses a first dealer beside the draw, which decides it.
        first_dealer=0 if drawn else draw(st.integers(0, players - 1), label="first dealer"),
        draw_for_deal=drawn,
        # Any first deal reaches 1 (the deal's points are positive); 15 takes a deal or more.
        target_score=draw(st.sampled_from([1, 1, 15]), label="target"),
        tie_rule=draw(st.sampled_from(list(TieRule)), label="tie rule"),
    )
    try:
        config.validate()
    except ConfigError as error:  # the strategy only builds valid configurations
        raise AssertionError(error) from None
    return config, codec.config_to_proto(config)


def check_match(stub: Stub, config: Config, message: pb.GameConfig, seed: int) -> None:
    """Play a whole match on the server and in-process, checking every response."""
    rng = random.Random(seed)
    started = stub.NewGame(pb.NewGameRequest(config=message, seed=seed))
    state, events = open_game(config, seed=seed)
    check_view(started.view, state, None, events)
    check_events(started.events, events, state, None)
    token, seat_tokens = started.state, started.seat_tokens
    assert len(seat_tokens) == config.players
    for seat in range(config.players):
        view_request = pb.GetViewRequest(state=token, seat=seat, seat_token=seat_tokens[seat])
        seat_view = stub.GetView(view_request).view
        check_view(seat_view, state, seat)
        assert seat_view.state_id == started.view.state_id
    while not state.over:
        mover = state.turn
        request = pb.LegalMovesRequest(state=token, seat=mover, seat_token=seat_tokens[mover])
        check_legal_moves(stub.LegalMoves(request), state, mover)
        if rng.random() < 0.2:  # a seat out of turn learns no options (K7.7)
            other = rng.choice([s for s in range(config.players) if s != mover])
            request = pb.LegalMovesRequest(state=token, seat=other, seat_token=seat_tokens[other])
            assert list(stub.LegalMoves(request).moves) == []
        move = rng.choice(legal_moves(state, mover))
        played = stub.Play(
            pb.PlayRequest(
                state=token, seat=mover, seat_token=seat_tokens[mover], move=move_proto(move)
            )
        )
        state, events = play(state, mover, move)
        check_view(played.view, state, mover, events)
        check_events(played.events, events, state, mover)
        token = played.state
        viewer = rng.choice([None, *range(config.players)])
        if viewer is None:
            view = stub.GetView(pb.GetViewRequest(state=token)).view
        else:
            view = stub.GetView(
                pb.GetViewRequest(state=token, seat=viewer, seat_token=seat_tokens[viewer])
            ).view
        check_view(view, state, viewer)
        assert view.state_id == played.view.state_id  # one state, one id, whoever looks
        if any(isinstance(event, DealEnded) for event in events):
            check_score(stub.Score(pb.ScoreRequest(state=token)), state)
    assert state.results, "the match ended without a deal"
    hypothesis.event(f"{len(state.results)} deal(s), {state.move_number} moves")


@pytest.mark.parametrize("players", [2, 3, 4, 5, 6])
@settings(max_examples=fuzz_examples(3), deadline=None, database=None)
@given(data=st.data())
def test_no_response_shows_a_hidden_card(stub, players, data):
    config, message = config_for(players, data)
    seed = data.draw(st.integers(0, 2**63 - 1), label="seed")
    check_match(stub, config, message, seed)


def test_a_seed_left_out_is_63_random_bits(stub: Stub) -> None:
    """krypkasino.proto, ``NewGameRequest.seed``: left out, the server picks 63 random
    bits, as a seed shows every hand and the stock to whoever can guess it (K14). The
    session server seals with ``TEST_KEY``, so its tokens open here. Sixteen seeds of
    63 random bits all below 2**56 (a short seed) or equal happen with odds of 2**-112."""
    sealer = StateSealer(KeyRing.parse(TEST_KEY), game="krypkasino")
    seeds = set()
    for _ in range(16):
        game = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)))
        seeds.add(pb.GameState.FromString(sealer.open(game.state)).seed)
    assert len(seeds) == 16
    assert 2**56 <= max(seeds) < 2**63


# -- the checks catch leaks ------------------------------------------------------------


@pytest.fixture(scope="module")
def opening(stub: Stub) -> tuple[pb.NewGameResponse, State]:
    config = Config(players=3)
    started = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=3), seed=21))
    state, _ = open_game(config, seed=21)
    return started, state


def a_hidden_card(state: State, seat: int | None) -> Card:
    """A card of another hand or the stock with no public twin."""
    pool = public_cards(state)
    return next(c for c in sorted(hidden_cards(state, seat)) if not pool[c])


def assert_leak_caught(path: str, card: Card, check: Callable[..., None], *args: object) -> None:
    """``check(*args)`` fails with ``assert_public``'s message for ``card`` hidden in
    ``path``: the privacy check caught it, not some other assertion of ``check``."""
    message = (
        f"{path} shows {cards_str([card])}, which are not public; "
        f"hidden from the viewer among them: {cards_str([card])}"
    )
    with pytest.raises(AssertionError, match=re.escape(message)):
        check(*args)


def test_the_checks_accept_the_real_responses(stub, opening):
    started, state = opening
    view = stub.GetView(
        pb.GetViewRequest(state=started.state, seat=1, seat_token=started.seat_tokens[1])
    ).view
    check_view(view, state, 1)
    check_view(started.view, state, None)


@pytest.mark.parametrize("field", ["table", "set_aside", "markers.cards"])
def test_the_checks_catch_a_hidden_card_in_a_public_field(stub, opening, field):
    started, state = opening
    view = stub.GetView(
        pb.GetViewRequest(state=started.state, seat=1, seat_token=started.seat_tokens[1])
    ).view
    card = a_hidden_card(state, 1)
    leaky = pb.View()
    leaky.CopyFrom(view)
    if field == "table":  # swapped in: the table keeps its size
        assert leaky.table, "the opening deals table cards"
        leaky.table[0].CopyFrom(card_proto(card))
    elif field == "set_aside":
        leaky.set_aside.append(card_proto(card))
    else:
        leaky.markers[0].cards.append(card_proto(card))
    assert_leak_caught(f"view.{field}", card, check_view, leaky, state, 1)


def test_the_checks_catch_a_hand_in_the_public_view(opening):
    started, state = opening
    leaky = pb.View()
    leaky.CopyFrom(started.view)
    leaky.hand.extend(card_proto(c) for c in state.hands[0])
    shown = cards_str(state.hands[0])
    with pytest.raises(AssertionError, match=re.escape(f"view.hand shows {shown}, not the")):
        check_view(leaky, state, None)


def test_the_checks_catch_a_hidden_card_in_an_event(opening):
    started, state = opening
    _, events = open_game(Config(players=3), seed=21)
    check_events(started.events, events, state, 0)
    card = a_hidden_card(state, 0)
    doctored = [pb.Event() for _ in started.events]
    for copy, original in zip(doctored, started.events, strict=True):
        copy.CopyFrom(original)
        if copy.WhichOneof("kind") == "distribution_dealt":
            copy.distribution_dealt.table.append(card_proto(card))
    assert_leak_caught(
        "events.distribution_dealt.table", card, check_events, doctored, events, state, 0
    )
