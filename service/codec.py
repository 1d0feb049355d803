"""Conversions between the Krypkasino engine's values and the v1 protobuf messages.

Runs on every request (design sections 3 and 4), so conversions are plain
constructor calls over precomputed tables. API cards are ``cards.v1.Card``
(rank and suit enums, ace = ``RANK_ACE`` = 1); inside the internal
``GameState`` cards are bytes of engine card codes (spec K1.1).

Token format decisions (the proto is silent on them):

- Defaults are written as zero values (``TEAM_MODE_UNSPECIFIED`` for
  individual play, no ``rules`` message with default flags) to keep tokens small.
- ``GameState.results`` stores each deal score compactly: per seat only the
  independent items ``storan``, ``lillan``, ``ace_of_spades``,
  ``other_spades``, ``other_aces``, ``sweeps_made`` and ``bordstabbe``. The
  derived items (``seat``, ``card_points``, ``sweeps_conceded``,
  ``last_capture``, ``total``) and ``team_totals`` are recomputed by the K12.1
  formulas when a state is read, and any stored value of them is ignored, so
  a later release may write them without breaking this one. API messages
  (views, scores, events) always carry every item.
- ``state_from_proto`` trusts nothing: a plain-mode token can hold anything,
  so every field is checked against the rules before a ``State`` is built.
  A game's config and finished deals repeat in every token it produces, so
  their checked conversions are kept in small LRU caches keyed by their
  serialized bytes (256 configs, 1024 deal histories per process).

>>> from engine.cards import parse_card
>>> card_to_proto(parse_card("10D"))
rank: RANK_TEN
suit: SUIT_DIAMONDS
<BLANKLINE>
>>> card_from_proto(card_to_proto(parse_card("10D")), "card") == parse_card("10D")
True
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import NamedTuple, TypeVar, cast

from cardrules.cards.v1 import cards_pb2
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from engine.cards import CARDS_PER_DECK, JACK, SPADES, Card, cards_str
from engine.krypkasino.config import Config, ConfigError, Removal, Rules, Teams, TieRule
from engine.krypkasino.dealing import draw_for_deal
from engine.krypkasino.events import (
    Bordstabbe,
    Captured,
    CardsSetAside,
    Crawled,
    DealEnded,
    DealerDrawn,
    DistributionDealt,
    Event,
    MatchEnded,
    TiebreakDeal,
)
from engine.krypkasino.moves import Move, SweepKind, sweep_kind
from engine.krypkasino.scoring import (
    DealResult,
    ScoreSheet,
    SeatScore,
    card_points,
    match_outcome,
    team_totals,
)
from engine.krypkasino.state import State
from engine.krypkasino.views import View

__all__ = [
    "CodecError",
    "card_from_proto",
    "card_to_proto",
    "config_from_proto",
    "config_to_proto",
    "deal_result_from_proto",
    "deal_result_to_proto",
    "deck_from_proto",
    "events_to_proto",
    "legal_move_to_proto",
    "move_from_proto",
    "move_to_proto",
    "score_to_proto",
    "state_from_proto",
    "state_id",
    "state_to_proto",
    "view_to_proto",
]

T = TypeVar("T")


class CodecError(ValueError):
    """A request field that cannot be converted: ``field`` is its path, e.g. ``move.card.rank``."""

    def __init__(self, field: str, description: str) -> None:
        super().__init__(f"{field}: {description}")
        self.field = field
        self.description = description


# --- enums -----------------------------------------------------------------

_TEAMS_FROM = (Teams.INDIVIDUAL, Teams.INDIVIDUAL, Teams.PAIRS, Teams.TRIOS)
_TEAMS_TO = {
    Teams.INDIVIDUAL: pb.TEAM_MODE_UNSPECIFIED,
    Teams.PAIRS: pb.TEAM_MODE_PAIRS,
    Teams.TRIOS: pb.TEAM_MODE_TRIOS,
}
_REMOVAL_FROM = (Removal.COURTS, Removal.COURTS, Removal.SPADES, Removal.NONE)
_REMOVAL_TO = {
    Removal.COURTS: pb.REMOVAL_UNSPECIFIED,
    Removal.SPADES: pb.REMOVAL_SPADES,
    Removal.NONE: pb.REMOVAL_NONE,
}
_TIE_FROM = (TieRule.SHARED, TieRule.SHARED, TieRule.TIEBREAK_DEAL)
_TIE_TO = {
    TieRule.SHARED: pb.TIE_RULE_UNSPECIFIED,
    TieRule.TIEBREAK_DEAL: pb.TIE_RULE_TIEBREAK_DEAL,
}
_KIND_TO = {
    SweepKind.NONE: pb.MOVE_KIND_CAPTURE,
    SweepKind.SWEEP: pb.MOVE_KIND_SWEEP,
    SweepKind.DOUBLE: pb.MOVE_KIND_DOUBLE_SWEEP,
}
_DEFAULT_RULES = Rules()


def _enum(value: int, table: tuple[T, ...], field: str, enum_name: str) -> T:
    if 0 <= value < len(table):
        return table[value]
    raise CodecError(field, f"unknown {enum_name} value {value}")


# --- config ----------------------------------------------------------------


def config_from_proto(msg: pb.GameConfig, field: str = "config") -> Config:
    """The engine config of a request's ``GameConfig``; ``*_UNSPECIFIED`` is the default rule.

    Only converts: the caller runs ``Config.validate`` (K3, K13.2, K16), which
    raises ``ConfigError`` naming the flag.
    """
    r = msg.rules
    rules = Rules(
        two_player_five_six=r.two_player_five_six,
        four_four=r.four_four,
        single_deck=r.single_deck,
        last_capture_point=r.last_capture_point,
        removal=_enum(r.removal, _REMOVAL_FROM, f"{field}.rules.removal", "Removal"),
        no_forced_sweep=r.no_forced_sweep,
        court_cards_rank_only=r.court_cards_rank_only,
        must_capture_if_able=r.must_capture_if_able,
        nordic_scoring=r.nordic_scoring,
        bordstabbe=r.bordstabbe,
    )
    return Config(
        players=msg.players,
        teams=_enum(msg.teams, _TEAMS_FROM, f"{field}.teams", "TeamMode"),
        rules=rules,
        first_dealer=msg.first_dealer,
        draw_for_deal=msg.draw_for_deal,
        match_deals=msg.match_deals if msg.HasField("match_deals") else None,
        target_score=msg.target_score if msg.HasField("target_score") else None,
        tie_rule=_enum(msg.tie_rule, _TIE_FROM, f"{field}.tie_rule", "TieRule"),
    )


@functools.lru_cache(maxsize=256)
def config_to_proto(config: Config) -> pb.GameConfig:
    """The ``GameConfig`` of an engine config, defaults as zero values.

    Cached (every response carries it); callers only assign it into other
    messages, which copies it, and never mutate it.
    """
    r = config.rules
    rules = None
    if r != _DEFAULT_RULES:
        rules = pb.Rules(
            two_player_five_six=r.two_player_five_six,
            four_four=r.four_four,
            single_deck=r.single_deck,
            last_capture_point=r.last_capture_point,
            removal=_REMOVAL_TO[r.removal],
            no_forced_sweep=r.no_forced_sweep,
            court_cards_rank_only=r.court_cards_rank_only,
            must_capture_if_able=r.must_capture_if_able,
            nordic_scoring=r.nordic_scoring,
            bordstabbe=r.bordstabbe,
        )
    return pb.GameConfig(
        players=config.players,
        teams=_TEAMS_TO[config.teams],
        rules=rules,
        first_dealer=config.first_dealer,
        draw_for_deal=config.draw_for_deal,
        match_deals=config.match_deals,
        target_score=config.target_score,
        tie_rule=_TIE_TO[config.tie_rule],
    )


# --- cards and moves -------------------------------------------------------

_RANKS = tuple(cards_pb2.Rank.ValueType(r + 1) for r in range(13))
_SUITS = tuple(cards_pb2.Suit.ValueType(s + 1) for s in range(4))
# Message constructors and ``extend`` copy their arguments, so these are never aliased.
_CARD_PROTOS = tuple(
    cards_pb2.Card(rank=_RANKS[c >> 2], suit=_SUITS[c & 3]) for c in range(CARDS_PER_DECK)
)


def _card_error(msg: cards_pb2.Card, field: str) -> CodecError:
    rank, suit = msg.rank, msg.suit
    if not 0 < rank <= 13:
        what = "RANK_UNSPECIFIED: a card needs a rank" if rank == 0 else f"unknown Rank {rank}"
        return CodecError(f"{field}.rank", what)
    what = "SUIT_UNSPECIFIED: a card needs a suit" if suit == 0 else f"unknown Suit {suit}"
    return CodecError(f"{field}.suit", what)


def card_from_proto(msg: cards_pb2.Card, field: str) -> Card:
    """The engine code of an API card (K1.1); ``CodecError`` names ``field.rank`` or ``.suit``."""
    rank, suit = msg.rank, msg.suit
    if 0 < rank <= 13 and 0 < suit <= 4:
        return Card(rank * 4 + suit - 5)
    raise _card_error(msg, field)


def _cards_from_proto(msgs: Iterable[cards_pb2.Card], field: str) -> tuple[Card, ...]:
    """Cards of a repeated field; errors name ``field[i]``."""
    out = []
    for i, msg in enumerate(msgs):
        rank, suit = msg.rank, msg.suit
        if not (0 < rank <= 13 and 0 < suit <= 4):
            raise _card_error(msg, f"{field}[{i}]")
        out.append(Card(rank * 4 + suit - 5))
    return tuple(out)


def card_to_proto(card: Card) -> cards_pb2.Card:
    """The API card of an engine code."""
    return cards_pb2.Card(rank=_RANKS[card >> 2], suit=_SUITS[card & 3])


def _protos(cards: Iterable[Card]) -> list[cards_pb2.Card]:
    return [_CARD_PROTOS[c] for c in cards]


def deck_from_proto(msg: cards_pb2.Deck, field: str) -> tuple[Card, ...]:
    """The cards of a deck, top first; the engine checks that it is a full deck (K2.1)."""
    return _cards_from_proto(msg.cards, f"{field}.cards")


def move_from_proto(msg: pb.Move, field: str = "move") -> Move:
    """The engine move (K7.5), captures in canonical order; the card is required."""
    if not msg.HasField("card"):
        raise CodecError(f"{field}.card", "a move needs the card played from hand")
    card = card_from_proto(msg.card, f"{field}.card")
    return Move.of(card, _cards_from_proto(msg.captures, f"{field}.captures"))


def move_to_proto(move: Move) -> pb.Move:
    """The API move; no captures is a crawl (K8.2)."""
    return pb.Move(card=_CARD_PROTOS[move.card], captures=_protos(move.captures))


def _point_table(nordic: bool) -> tuple[int, ...]:
    return tuple(sum(card_points((Card(c),), nordic).values()) for c in range(CARDS_PER_DECK))


_CARD_POINTS = (_point_table(False), _point_table(True))


def legal_move_to_proto(table: Sequence[Card], move: Move, nordic: bool) -> pb.LegalMove:
    """A legal move annotated with its K8 kind and the K2.4 card points it takes (0 for a crawl)."""
    if not move.captures:
        return pb.LegalMove(move=move_to_proto(move), kind=pb.MOVE_KIND_CRAWL)
    points = _CARD_POINTS[nordic]
    taken = points[move.card] + sum(points[c] for c in move.captures)
    kind = _KIND_TO[sweep_kind(table, move)]
    return pb.LegalMove(move=move_to_proto(move), kind=kind, card_points=taken)


# --- scores ----------------------------------------------------------------


# SeatScore and the SeatScore message share their field names (K12.1 items).
_SEAT_SCORE_FIELDS = ("seat", *SeatScore.item_names())


def _seat_score_to_proto(s: SeatScore) -> pb.SeatScore:
    return pb.SeatScore(**{name: getattr(s, name) for name in _SEAT_SCORE_FIELDS})


def deal_result_to_proto(result: DealResult) -> pb.DealScore:
    """A finished deal's itemised score sheet (K12.1), every item filled."""
    return pb.DealScore(
        deal_number=result.number,
        dealer=result.dealer,
        recipient=result.recipient,
        seats=[_seat_score_to_proto(s) for s in result.scores],
        team_totals=result.team_totals,
    )


def deal_result_from_proto(msg: pb.DealScore) -> DealResult:
    """The engine result of a full ``DealScore``, read field by field (no rule checks)."""
    return DealResult(
        number=msg.deal_number,
        dealer=msg.dealer,
        recipient=msg.recipient,
        scores=tuple(
            SeatScore(**{name: getattr(s, name) for name in _SEAT_SCORE_FIELDS}) for s in msg.seats
        ),
        team_totals=tuple(msg.team_totals),
    )


def score_to_proto(sheet: ScoreSheet) -> pb.ScoreResponse:
    """The Score RPC's answer: every deal's sheet, match totals and winners (K12, K13)."""
    return pb.ScoreResponse(
        deals=[deal_result_to_proto(r) for r in sheet.deals],
        totals=sheet.totals,
        game_over=sheet.over,
        winners=sheet.winners,
    )


# --- the internal state ----------------------------------------------------


def _compact_result(result: DealResult) -> pb.DealScore:
    """A deal score as stored in tokens: only the items the others derive from (K12.1)."""
    return pb.DealScore(
        deal_number=result.number,
        dealer=result.dealer,
        recipient=result.recipient,
        seats=[
            pb.SeatScore(
                storan=s.storan,
                lillan=s.lillan,
                ace_of_spades=s.ace_of_spades,
                other_spades=s.other_spades,
                other_aces=s.other_aces,
                sweeps_made=s.sweeps_made,
                bordstabbe=s.bordstabbe,
            )
            for s in result.scores
        ],
    )


def state_to_proto(state: State, game_id: str) -> pb.GameState:
    """The internal ``GameState`` sealed inside state tokens (design section 4)."""
    draw = state.dealer_draw
    return pb.GameState(
        game_id=game_id,
        config=config_to_proto(state.config),
        seed=state.seed,
        decks=[bytes(deck) for deck in state.decks],
        first_dealer=state.first_dealer,
        dealer_draw_seats=bytes(seat for seat, _ in draw),
        dealer_draw_cards=bytes(card for _, card in draw),
        deal=state.deal,
        dealer=state.dealer,
        distribution=state.distribution,
        stock=bytes(state.stock),
        hands=[bytes(hand) for hand in state.hands],
        table=bytes(state.table),
        set_aside=bytes(state.set_aside),
        piles=[bytes(pile) for pile in state.piles],
        markers=[bytes(markers) for markers in state.markers],
        turn=state.turn,
        last_capturer=state.last_capturer,
        bordstabbe_seat=state.bordstabbe_seat,
        results=[_compact_result(r) for r in state.results],
        tiebreak=state.tiebreak,
        winners=state.winners,
        over=state.over,
        move_number=state.move_number,
    )


def state_id(serialized_state: bytes) -> str:
    """16 hex digits of SHA-256 of a serialized ``GameState``, for optimistic concurrency."""
    return hashlib.sha256(serialized_state).hexdigest()[:16]


def _cards(data: bytes) -> tuple[Card, ...]:
    # Card is a NewType of int: the byte values already are engine card codes.
    return cast(tuple[Card, ...], tuple(data))


_FULL_DECKS = {copies: bytes(sorted(list(range(CARDS_PER_DECK)) * copies)) for copies in (1, 2)}
_COURTS = bytes(range(JACK * 4, CARDS_PER_DECK))
_SPADES = bytes(range(SPADES, CARDS_PER_DECK, 4))


class _StateError(Exception):
    """Internal: one inconsistency of a GameState; becomes ``CodecError("state", ...)``."""


def state_from_proto(msg: pb.GameState, *, trusted: bool = False) -> tuple[State, str]:
    """``(state, game_id)`` of a ``GameState``, checked against the rules first.

    ``trusted`` skips the consistency checks: for states that came out of a
    sealed token, which AES-GCM proves this service made. A plain-mode token
    can hold anything, so without ``trusted`` this raises ``CodecError`` with
    field ``state`` and a precise description for any inconsistency: config
    (K3, K16), card codes, seats, dealer rotation (K4), dealing counts (K15.2),
    K15.1 conservation, markers (K8.4), exact hand sizes (K15.3), the move
    number, deal scores (K12.1) and the match outcome (K13). Never another
    exception type. Descriptions are only formatted on failure: this is the
    hot path of every request.
    """
    try:
        return (_trusted_state(msg) if trusted else _state_from_proto(msg)), msg.game_id
    except _StateError as error:
        raise CodecError("state", str(error)) from None


class _Layout(NamedTuple):
    """A checked config with the dealing numbers of K5.1/K5.2 that state checks need."""

    config: Config
    full_deck: list[int]  # every card code ``copies`` times, sorted (K2.1)
    distributions: int
    first_hand: int
    later_hand: int
    stock_after_first: int
    per_distribution: int  # cards each later distribution takes from the stock
    per_deal: int  # moves in a deal: every card dealt to a hand is played


# Errors are not cached: lru_cache only keeps returned values.
@functools.lru_cache(maxsize=256)
def _layout(data: bytes) -> _Layout:
    try:
        config = config_from_proto(pb.GameConfig.FromString(data)).validate()
    except CodecError as error:
        raise _StateError(f"{error.field}: {error.description}") from None
    except ConfigError as error:
        raise _StateError(f"config.{error.flag}: {error.reason}") from None
    n, schedule = config.players, config.schedule
    later_hand = sum(h for h, _ in schedule.later_rounds)
    later_table = sum(t for _, t in schedule.later_rounds)
    return _Layout(
        config=config,
        full_deck=list(_FULL_DECKS[config.copies]),
        distributions=config.distributions,
        first_hand=schedule.first_hand,
        later_hand=later_hand,
        stock_after_first=config.deck_size - n * schedule.first_hand - schedule.first_table,
        per_distribution=n * later_hand + later_table,
        per_deal=n * (schedule.first_hand + later_hand * (config.distributions - 1)),
    )


def _state_from_proto(msg: pb.GameState) -> State:
    config_data = msg.config.SerializeToString()
    layout = _layout(config_data)
    config = layout.config
    n, copies, rules = config.players, config.copies, config.rules
    hands_b, piles_b, markers_b = list(msg.hands), list(msg.piles), list(msg.markers)
    if not len(hands_b) == len(piles_b) == len(markers_b) == n:
        raise _StateError(
            f"{len(hands_b)} hands, {len(piles_b)} piles and {len(markers_b)} marker lists "
            f"for {n} players"
        )
    deal, dealer, distribution, turn, over = (
        msg.deal,
        msg.dealer,
        msg.distribution,
        msg.turn,
        msg.over,
    )
    first_dealer = msg.first_dealer
    last_capturer = msg.last_capturer if msg.HasField("last_capturer") else None
    bordstabbe_seat = msg.bordstabbe_seat if msg.HasField("bordstabbe_seat") else None
    for name, seat in (
        ("turn", turn),
        ("dealer", dealer),
        ("first_dealer", first_dealer),
        ("last_capturer", last_capturer),
        ("bordstabbe_seat", bordstabbe_seat),
    ):
        if seat is not None and not 0 <= seat < n:
            raise _StateError(f"{name} {seat} is not a seat of {n} players")
    dealer_draw, drawn_dealer = _dealer_draw(msg, config)
    if first_dealer != drawn_dealer:
        raise _StateError(f"first_dealer {first_dealer} is not seat {drawn_dealer} (K4.2)")
    if deal < 1 or dealer != (first_dealer + deal - 1) % n:
        raise _StateError(
            f"deal {deal} with dealer {dealer} does not follow the rotation "
            f"from seat {first_dealer} (K4.3)"
        )
    distributions = layout.distributions
    if not 1 <= distribution <= distributions:
        raise _StateError(f"distribution {distribution} is not in 1..{distributions} (K5.2)")

    stock_b, table_b, aside_b = msg.stock, msg.table, msg.set_aside
    everything = b"".join((stock_b, table_b, aside_b, *hands_b, *piles_b))
    if sorted(everything) != layout.full_deck:
        raise _StateError(_conservation_problem(msg, everything, copies))
    for seat, markers in enumerate(markers_b):
        if markers and (
            max(markers) >= CARDS_PER_DECK
            or any(piles_b[seat].count(m) < markers.count(m) for m in set(markers))
        ):
            raise _StateError(f"markers[{seat}] are not all in piles[{seat}] (K8.4)")

    first_hand, later_hand = layout.first_hand, layout.later_hand
    stock_left = layout.stock_after_first - layout.per_distribution * (distribution - 1)
    if len(stock_b) != stock_left:
        raise _StateError(
            f"the stock holds {len(stock_b)} cards, not {stock_left} "
            f"after distribution {distribution} (K15.2)"
        )
    for seat, hand in enumerate(hands_b):
        if bytes(sorted(hand)) != hand:
            raise _StateError(f"hands[{seat}] is not sorted")
    sizes = [len(hand) for hand in hands_b]
    first_player = (dealer + 1) % n
    if over:
        if any(sizes) or table_b or aside_b or distribution != distributions:
            raise _StateError("the match is over but its last deal is not (K15.8)")
        if turn != first_player:
            raise _StateError(f"turn {turn}: a finished deal ends at seat {first_player}")
    else:
        _check_hand_sizes(
            sizes, turn, first_player, first_hand if distribution == 1 else later_hand
        )
        if (last_capturer is None) == any(piles_b) or (
            last_capturer is not None and not piles_b[last_capturer]
        ):
            raise _StateError(f"last_capturer {last_capturer} does not match the piles (K8.3)")
    if aside_b and (
        rules.removal is Removal.NONE
        or aside_b.translate(None, _COURTS if rules.removal is Removal.COURTS else _SPADES)
    ):
        raise _StateError(f"set_aside holds a card that removal {rules.removal.value} keeps (K6.1)")
    if bordstabbe_seat is not None and not (rules.bordstabbe and bordstabbe_seat == first_player):
        raise _StateError(
            f"bordstabbe_seat {bordstabbe_seat}: only the first player, with bordstabbe (K16.10)"
        )

    decks = []
    for i, deck in enumerate(msg.decks):
        if bytes(sorted(deck)) != _FULL_DECKS[copies]:
            raise _StateError(f"decks[{i}] is not a full deck of {config.deck_size} cards (K2.1)")
        decks.append(_cards(deck))
    if deal <= len(decks) and not msg.decks[deal - 1].endswith(stock_b):
        raise _StateError(f"the stock is not the rest of decks[{deal - 1}]")

    history = _history(config_data, first_dealer, tuple(r.SerializeToString() for r in msg.results))
    results = history.results
    if len(results) != (deal if over else deal - 1):
        raise _StateError(f"{len(results)} finished deals in deal {deal}, over={over}")
    tiebreak, winners = tuple(msg.tiebreak), tuple(msg.winners)
    if over:
        if history.outcome != (True, winners, ()) or tiebreak:
            raise _StateError(f"winners {list(winners)} are not the match outcome (K13.3)")
    elif history.pending or history.outcome != (False, (), tiebreak) or winners:
        raise _StateError(
            f"after deal {len(results)} the match is not in play as stored (K13.2, K13.3)"
        )
    played = (deal - 1) * layout.per_deal + n * (first_hand + later_hand * (distribution - 1))
    played -= sum(sizes)
    if msg.move_number != played:
        raise _StateError(f"move_number {msg.move_number}, but {played} cards were played")

    return State(
        config=config,
        seed=msg.seed,
        decks=tuple(decks),
        first_dealer=first_dealer,
        dealer_draw=dealer_draw,
        deal=deal,
        dealer=dealer,
        distribution=distribution,
        stock=_cards(stock_b),
        hands=tuple(_cards(hand) for hand in hands_b),
        table=_cards(table_b),
        set_aside=_cards(aside_b),
        piles=tuple(_cards(pile) for pile in piles_b),
        markers=tuple(_cards(markers) for markers in markers_b),
        turn=turn,
        last_capturer=last_capturer,
        bordstabbe_seat=bordstabbe_seat,
        results=results,
        tiebreak=tiebreak,
        winners=winners,
        over=over,
        move_number=msg.move_number,
    )


def _trusted_state(msg: pb.GameState) -> State:
    """The State of a GameState this service sealed itself: no checks, only decoding."""
    config_data = msg.config.SerializeToString()
    first_dealer = msg.first_dealer
    history = _history(config_data, first_dealer, tuple(r.SerializeToString() for r in msg.results))
    draw = msg.dealer_draw_cards
    return State(
        config=_layout(config_data).config,
        seed=msg.seed,
        decks=tuple(_cards(deck) for deck in msg.decks),
        first_dealer=first_dealer,
        dealer_draw=tuple(zip(msg.dealer_draw_seats, _cards(draw), strict=True)) if draw else (),
        deal=msg.deal,
        dealer=msg.dealer,
        distribution=msg.distribution,
        stock=_cards(msg.stock),
        hands=tuple(_cards(hand) for hand in msg.hands),
        table=_cards(msg.table),
        set_aside=_cards(msg.set_aside),
        piles=tuple(_cards(pile) for pile in msg.piles),
        markers=tuple(_cards(markers) for markers in msg.markers),
        turn=msg.turn,
        last_capturer=msg.last_capturer if msg.HasField("last_capturer") else None,
        bordstabbe_seat=msg.bordstabbe_seat if msg.HasField("bordstabbe_seat") else None,
        results=history.results,
        tiebreak=tuple(msg.tiebreak),
        winners=tuple(msg.winners),
        over=msg.over,
        move_number=msg.move_number,
    )


def _conservation_problem(msg: pb.GameState, everything: bytes, copies: int) -> str:
    """The precise K15.1 failure: a byte that is no card, or the missing and extra cards."""
    places = [("stock", msg.stock), ("table", msg.table), ("set_aside", msg.set_aside)]
    places += [(f"hands[{seat}]", hand) for seat, hand in enumerate(msg.hands)]
    places += [(f"piles[{seat}]", pile) for seat, pile in enumerate(msg.piles)]
    for name, data in places:
        if data and max(data) >= CARDS_PER_DECK:
            return f"{name} holds byte {max(data)}, which is no card code (0-51)"
    full = Counter(_FULL_DECKS[copies])
    counts = Counter(everything)
    parts = [f"cards are not conserved (K15.1): {len(everything)} cards, not {full.total()}"]
    missing = cast(list[Card], sorted((full - counts).elements()))
    extra = cast(list[Card], sorted((counts - full).elements()))
    if missing:
        parts.append("missing " + cards_str(missing))
    if extra:
        parts.append("too many " + cards_str(extra))
    return "; ".join(parts)


def _dealer_draw(msg: pb.GameState, config: Config) -> tuple[tuple[tuple[int, Card], ...], int]:
    """K4.2: ``(draws, first dealer)``; a stored draw must be what the rule makes of its cards."""
    seats, cards = msg.dealer_draw_seats, msg.dealer_draw_cards
    if not config.draw_for_deal:
        if seats or cards:
            raise _StateError("a dealer draw without draw_for_deal (K4.2)")
        return (), config.first_dealer
    if not cards or max(cards) >= CARDS_PER_DECK:
        raise _StateError("dealer_draw_cards is empty or holds a byte that is no card (K4.2)")
    try:
        dealer, draws = draw_for_deal(config.players, iter(_cards(cards)))
    except ValueError:
        raise _StateError("dealer_draw_cards run out before a dealer is found (K4.2)") from None
    if len(seats) != len(cards) or draws != tuple(zip(seats, _cards(cards), strict=True)):
        raise _StateError("dealer_draw_seats and dealer_draw_cards are not a draw for deal (K4.2)")
    return draws, dealer


def _check_hand_sizes(sizes: list[int], turn: int, first_player: int, dealt: int) -> None:
    """K15.3 made exact: the seats that moved this round hold one card less than the mover."""
    n = len(sizes)
    moved = (turn - first_player) % n
    mover = sizes[turn]
    if not 0 < mover <= dealt or any(
        size != (mover - 1 if (seat - first_player) % n < moved else mover)
        for seat, size in enumerate(sizes)
    ):
        raise _StateError(f"hand sizes {sizes} with seat {turn} to move (K7.8, K15.3)")


class _History(NamedTuple):
    """The finished deals and the K13 outcome they lead to."""

    results: tuple[DealResult, ...]
    pending: tuple[int, ...]  # tie-break teams decided after the second-last deal
    outcome: tuple[bool, tuple[int, ...], tuple[int, ...]]  # match_outcome after the last deal


@functools.lru_cache(maxsize=1024)
def _history(config_data: bytes, first_dealer: int, stored: tuple[bytes, ...]) -> _History:
    """Finished deals from their stored items (derived items recomputed, K12.1), then K13."""
    config = _layout(config_data).config
    results = tuple(
        _result(config, first_dealer, i, pb.DealScore.FromString(data))
        for i, data in enumerate(stored)
    )
    if not results:
        return _History((), (), (False, (), ()))
    # Up to the last two deals the match must not have ended at all (K13.2).
    totals = [0] * config.team_count
    limit, target = config.deal_limit, config.target_score
    for number, result in enumerate(results[:-2], start=1):
        for team, points in enumerate(result.team_totals):
            totals[team] += points
        if (target is not None and max(totals) >= target) or (
            limit is not None and number >= limit
        ):
            raise _StateError(f"the match ended after deal {number} (K13.2)")
    pending: tuple[int, ...] = ()
    if len(results) > 1:
        ended, _, pending = match_outcome(config, results[:-1], ())
        if ended:
            raise _StateError(f"the match ended after deal {len(results) - 1} (K13.2)")
    return _History(results, pending, match_outcome(config, results, pending))


def _result(config: Config, first_dealer: int, i: int, stored: pb.DealScore) -> DealResult:
    """One finished deal; every card ends in a pile, so item columns add up to the deck's."""
    n, copies, rules = config.players, config.copies, config.rules
    nordic = rules.nordic_scoring
    lillan_unit = 1 if nordic else 2
    deck_points = (
        0 if nordic else 3 * copies,
        lillan_unit * copies,
        2 * copies,
        11 * copies,
        3 * copies,
    )
    # A deal has fewer captures than cards, each worth at most a double sweep (K9.1).
    max_made = 10 * config.deck_size
    dealer = (first_dealer + i) % n
    recipient = stored.recipient
    seats = stored.seats
    if (
        stored.deal_number != i + 1
        or stored.dealer != dealer
        or not 0 <= recipient < n
        or len(seats) != n
    ):
        raise _StateError(
            f"results[{i}] is not deal {i + 1} dealt by seat {dealer} with {n} seat scores "
            "and a seat as recipient"
        )
    first_player = (dealer + 1) % n
    rows = []
    for seat, s in enumerate(seats):
        row = (s.storan, s.lillan, s.ace_of_spades, s.other_spades, s.other_aces)
        made, table = s.sweeps_made, s.bordstabbe
        if (
            min(row) < 0
            or row[0] % 3
            or row[1] % lillan_unit
            or row[2] % 2
            or not 0 <= made <= max_made
            or made % 5
            or (table and (table != -5 or not rules.bordstabbe or seat != first_player))
        ):
            raise _StateError(f"results[{i}].seats[{seat}] holds no K12.1 score items")
        rows.append((row, made, table))
    if tuple(map(sum, zip(*(row for row, _, _ in rows), strict=True))) != deck_points:
        raise _StateError(f"results[{i}]: the card points do not add up to the deck's (K2.4)")
    scores = []
    for seat, (row, made, table) in enumerate(rows):
        points = sum(row)
        conceded = -rows[(seat + 1) % n][1]
        last = int(rules.last_capture_point and seat == recipient)
        total = points + made + conceded + last + table
        scores.append(SeatScore(seat, *row, points, made, conceded, last, table, total))
    return DealResult(i + 1, dealer, recipient, tuple(scores), team_totals(config, scores))


# --- outputs -----------------------------------------------------------------


def view_to_proto(view: View, game_id: str, state_id: str) -> pb.View:
    """The API view (design section 3); optional fields stay unset when ``None``."""
    config = view.config
    return pb.View(
        game_id=game_id,
        config=config_to_proto(config),
        team_of_seat=[config.team_of(seat) for seat in range(config.players)],
        seat=view.seat,
        hand=_protos(view.hand),
        dealer=view.dealer,
        turn=view.turn,
        deal_number=view.deal,
        distribution=view.distribution,
        distributions=view.distributions,
        last_distribution=view.last_distribution,
        table=_protos(view.table),
        hand_sizes=view.hand_sizes,
        stock_size=view.stock_size,
        pile_sizes=view.pile_sizes,
        markers=[pb.SeatMarkers(cards=_protos(m)) for m in view.markers],
        set_aside=_protos(view.set_aside),
        last_capturer=view.last_capturer,
        bordstabbe_seat=view.bordstabbe_seat,
        sweep_ranks=[_RANKS[rank] for rank in view.sweep_ranks],
        deals=[deal_result_to_proto(r) for r in view.results],
        totals=view.totals,
        tiebreak_teams=view.tiebreak,
        game_over=view.over,
        winners=view.winners,
        move_number=view.move_number,
        state_id=state_id,
    )


def _event_to_proto(event: Event) -> pb.Event:
    match event:
        case Crawled():
            return pb.Event(crawled=pb.Crawled(seat=event.seat, card=_CARD_PROTOS[event.card]))
        case Captured():
            return pb.Event(
                captured=pb.Captured(
                    seat=event.seat,
                    card=_CARD_PROTOS[event.card],
                    captures=_protos(event.captures),
                    kind=_KIND_TO[event.sweep],
                    conceded_by=event.conceded_by,
                )
            )
        case DistributionDealt():
            return pb.Event(
                distribution_dealt=pb.DistributionDealt(
                    deal_number=event.deal,
                    distribution=event.distribution,
                    dealer=event.dealer,
                    table=_protos(event.table),
                    last=event.last,
                )
            )
        case CardsSetAside():
            return pb.Event(cards_set_aside=pb.CardsSetAside(cards=_protos(event.cards)))
        case DealEnded():
            return pb.Event(
                deal_ended=pb.DealEnded(
                    deal_number=event.deal,
                    recipient=event.recipient,
                    collected=_protos(event.collected),
                    score=deal_result_to_proto(event.result),
                )
            )
        case DealerDrawn():
            return pb.Event(
                dealer_drawn=pb.DealerDrawn(
                    seats=[seat for seat, _ in event.draws],
                    cards=_protos(card for _, card in event.draws),
                    dealer=event.dealer,
                )
            )
        case Bordstabbe():
            return pb.Event(bordstabbe=pb.Bordstabbe(seat=event.seat))
        case TiebreakDeal():
            return pb.Event(tiebreak_deal=pb.TiebreakDeal(teams=event.teams))
        case MatchEnded():
            return pb.Event(match_ended=pb.MatchEnded(totals=event.totals, winners=event.winners))


def events_to_proto(events: Sequence[Event]) -> list[pb.Event]:
    """API events, in order; each sets exactly one member of the ``kind`` oneof."""
    return [_event_to_proto(event) for event in events]


_KIND_FROM = {kind: sweep for sweep, kind in _KIND_TO.items()}


def _cards_of(msgs: Iterable[cards_pb2.Card]) -> tuple[Card, ...]:
    return _cards_from_proto(msgs, "event")


def event_from_proto(msg: pb.Event) -> Event:
    """The engine event of an API event (for clients such as ``simulate --server``)."""
    match msg.WhichOneof("kind"):
        case "crawled":
            return Crawled(msg.crawled.seat, card_from_proto(msg.crawled.card, "event"))
        case "captured":
            c = msg.captured
            return Captured(
                c.seat,
                card_from_proto(c.card, "event"),
                tuple(sorted(_cards_of(c.captures))),
                _KIND_FROM.get(c.kind, SweepKind.NONE),
                c.conceded_by,
            )
        case "distribution_dealt":
            d = msg.distribution_dealt
            return DistributionDealt(
                d.deal_number, d.distribution, d.dealer, _cards_of(d.table), d.last
            )
        case "cards_set_aside":
            return CardsSetAside(_cards_of(msg.cards_set_aside.cards))
        case "deal_ended":
            e = msg.deal_ended
            return DealEnded(
                e.deal_number, e.recipient, _cards_of(e.collected), deal_result_from_proto(e.score)
            )
        case "dealer_drawn":
            drawn = msg.dealer_drawn
            cards = _cards_of(drawn.cards)
            return DealerDrawn(tuple(zip(drawn.seats, cards, strict=True)), drawn.dealer)
        case "bordstabbe":
            return Bordstabbe(msg.bordstabbe.seat)
        case "tiebreak_deal":
            return TiebreakDeal(tuple(msg.tiebreak_deal.teams))
        case "match_ended":
            return MatchEnded(tuple(msg.match_ended.totals), tuple(msg.match_ended.winners))
    raise CodecError("event", "no event kind is set")
