"""The internal ``GameState`` inside state tokens: encoding, decoding, checking (design section 4).

Token format decisions (the proto is silent on them):

- ``GameState.results`` stores each deal score compactly: per seat only the
  independent items ``storan``, ``lillan``, ``ace_of_spades``,
  ``other_spades``, ``other_aces``, ``sweeps_made`` and ``bordstabbe``. The
  derived items (``seat``, ``card_points``, ``sweeps_conceded``,
  ``last_capture``, ``total``) and ``team_totals`` are recomputed by the K12.1
  formulas when a state is read, and any stored value of them is ignored, so
  a later release may write them without breaking this one. API messages
  (views, scores, events) always carry every item.
- ``state_from_proto`` checks every field against the rules before a
  ``State`` is built, because a plain-mode token can hold anything; states
  from sealed tokens, which only this service can make, skip the checks.
  A game's config and finished deals repeat in every token it produces, so
  their checked conversions are kept in small LRU caches keyed by their
  serialized bytes (256 configs, 1024 deal histories of at most
  ``CACHED_MATCH_DEALS`` deals per process).
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple, cast

from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from engine.cards import CARDS_PER_DECK, JACK, SPADES, Card, cards_str
from engine.krypkasino.config import CACHED_MATCH_DEALS, Config, ConfigError, Removal
from engine.krypkasino.dealing import draw_for_deal
from engine.krypkasino.scoring import (
    CARD_POINT_ITEMS,
    DealResult,
    assemble_scores,
    deck_card_points,
    match_outcome,
    team_totals,
)
from engine.krypkasino.state import State
from service.codec import CodecError, config_from_proto, config_to_proto


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
    """The internal ``GameState`` sealed inside state tokens (design section 4).

    Fields that are often zero, empty or unset are only written when they are
    not: proto3 leaves them out either way, and a constructor argument costs
    more than a test on every Play.
    """
    msg = pb.GameState(
        game_id=game_id,
        config=config_to_proto(state.config),
        deal=state.deal,
        dealer=state.dealer,
        distribution=state.distribution,
        stock=bytes(state.stock),
        hands=[bytes(hand) for hand in state.hands],
        table=bytes(state.table),
        piles=[bytes(pile) for pile in state.piles],
        markers=[bytes(markers) for markers in state.markers],
        turn=state.turn,
        move_number=state.move_number,
    )
    if state.seed:
        msg.seed = state.seed
    if state.decks:
        msg.decks.extend([bytes(deck) for deck in state.decks])
    if state.first_dealer:
        msg.first_dealer = state.first_dealer
    if draw := state.dealer_draw:
        msg.dealer_draw_seats = bytes(seat for seat, _ in draw)
        msg.dealer_draw_cards = bytes(card for _, card in draw)
    if state.set_aside:
        msg.set_aside = bytes(state.set_aside)
    if state.last_capturer is not None:
        msg.last_capturer = state.last_capturer
    if state.bordstabbe_seat is not None:
        msg.bordstabbe_seat = state.bordstabbe_seat
    if state.results:
        msg.results.extend([_compact_result(r) for r in state.results])
    if state.tiebreak:
        msg.tiebreak.extend(state.tiebreak)
    if state.winners:
        msg.winners.extend(state.winners)
    if state.over:
        msg.over = True
    return msg


def state_id(serialized_state: bytes) -> str:
    """16 hex digits of SHA-256 of a serialized ``GameState``, for optimistic concurrency."""
    return hashlib.sha256(serialized_state).hexdigest()[:16]


# Card is a NewType of int, so the byte values already are engine card codes and
# ``tuple`` itself converts: no wrapper call on the hot path (15 per decoded state).
_cards = cast(Callable[[bytes], tuple[Card, ...]], tuple)


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
    # Indexed by distribution - 1: the stock after it (K15.2) and the cards dealt to
    # the hands so far in the deal, each of them one move.
    stock_after: tuple[int, ...]
    hand_cards_dealt: tuple[int, ...]
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
    schedule, distributions = config.schedule, config.distributions
    numbers = range(1, distributions + 1)
    return _Layout(
        config=config,
        full_deck=list(_FULL_DECKS[config.copies]),
        distributions=distributions,
        first_hand=schedule.first_hand,
        later_hand=schedule.later_hand,
        stock_after=tuple(map(config.stock_after, numbers)),
        hand_cards_dealt=tuple(map(config.hand_cards_dealt, numbers)),
        per_deal=config.hand_cards_dealt(distributions),
    )


# The legal moves of a table grow exponentially with its size, so a plain token may
# not ask for one that no game reaches. Only the first distribution's table cards (6
# at most, K5.1) can repeat a value: a crawled card's value was no subset sum of the
# table (K7.4), so it differs from every table value, and values run 1..13; aces,
# crawled for their hand value 14, are the only other way to add a duplicate. Random
# play stays at or below about 12 cards. The worst table a reviewer built, low cards
# against a hand of A J Q K (values 14, 11, 12, 13), has 6,949 legal moves at 20
# cards (a 0.6 MB gRPC answer, a 4 MB JSON one that takes 0.5 s to render) and
# 61,202 at 24 (10 s over HTTP): 20 bounds what one forged request can cost.
MAX_PLAIN_TABLE = 20


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
    drawn_dealer = _drawn_dealer(msg, config)
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
    if len(table_b) > MAX_PLAIN_TABLE:
        raise _StateError(
            f"a table of {len(table_b)} cards: no game reaches more than {MAX_PLAIN_TABLE} (K7.4)"
        )
    everything = b"".join((stock_b, table_b, aside_b, *hands_b, *piles_b))
    if sorted(everything) != layout.full_deck:
        raise _StateError(_conservation_problem(msg, everything, copies))
    for seat, markers in enumerate(markers_b):
        # Every pile byte is a card now, so a marker that is none is in no pile either.
        if any(piles_b[seat].count(m) < markers.count(m) for m in set(markers)):
            raise _StateError(f"markers[{seat}] are not all in piles[{seat}] (K8.4)")

    first_hand, later_hand = layout.first_hand, layout.later_hand
    stock_left = layout.stock_after[distribution - 1]
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

    for i, deck in enumerate(msg.decks):
        if bytes(sorted(deck)) != _FULL_DECKS[copies]:
            raise _StateError(f"decks[{i}] is not a full deck of {config.deck_size} cards (K2.1)")
    if deal <= len(msg.decks) and not msg.decks[deal - 1].endswith(stock_b):
        raise _StateError(f"the stock is not the rest of decks[{deal - 1}]")

    history = _history(config_data, first_dealer, tuple(r.SerializeToString() for r in msg.results))
    results = history.results
    if len(results) != (deal if over else deal - 1):
        raise _StateError(f"{len(results)} finished deals in deal {deal}, over={over}")
    tiebreak, winners = tuple(msg.tiebreak), tuple(msg.winners)
    if over:
        if history.outcome != (True, winners, ()) or tiebreak:
            raise _StateError(f"winners {list(winners)} are not the match outcome (K13.3)")
    elif history.outcome != (False, (), tiebreak) or winners:
        raise _StateError(
            f"after deal {len(results)} the match is not in play as stored (K13.2, K13.3)"
        )
    played = (deal - 1) * layout.per_deal + layout.hand_cards_dealt[distribution - 1]
    played -= sum(sizes)
    if msg.move_number != played:
        raise _StateError(f"move_number {msg.move_number}, but {played} cards were played")

    # Every field is checked now: the state is built as a sealed one's is.
    return _trusted_state(msg, results)


_serialize_deal = pb.DealScore.SerializeToString


def _trusted_state(msg: pb.GameState, results: tuple[DealResult, ...] | None = None) -> State:
    """The State of a GameState this service sealed itself: no checks, only decoding.

    The hot path of every request: each field is read once from the message,
    and the deal history is only looked up when there is one (``results``, when
    the checked path has already decoded it).
    """
    config_data = msg.config.SerializeToString()
    first_dealer = msg.first_dealer
    stored = msg.results
    if results is None:
        results = (
            _trusted_results(config_data, first_dealer, tuple(map(_serialize_deal, stored)))
            if stored
            else ()
        )
    draw = msg.dealer_draw_cards
    return State(
        config=_layout(config_data).config,
        seed=msg.seed,
        decks=tuple(map(_cards, msg.decks)),
        first_dealer=first_dealer,
        dealer_draw=tuple(zip(msg.dealer_draw_seats, _cards(draw), strict=True)) if draw else (),
        deal=msg.deal,
        dealer=msg.dealer,
        distribution=msg.distribution,
        stock=_cards(msg.stock),
        hands=tuple(map(_cards, msg.hands)),
        table=_cards(msg.table),
        set_aside=_cards(msg.set_aside),
        piles=tuple(map(_cards, msg.piles)),
        markers=tuple(map(_cards, msg.markers)),
        turn=msg.turn,
        last_capturer=msg.last_capturer if msg.HasField("last_capturer") else None,
        bordstabbe_seat=msg.bordstabbe_seat if msg.HasField("bordstabbe_seat") else None,
        results=results,
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


def _drawn_dealer(msg: pb.GameState, config: Config) -> int:
    """K4.2: the first dealer; a stored draw must be what the rule makes of its cards."""
    seats, cards = msg.dealer_draw_seats, msg.dealer_draw_cards
    if not config.draw_for_deal:
        if seats or cards:
            raise _StateError("a dealer draw without draw_for_deal (K4.2)")
        return config.first_dealer
    if not cards or max(cards) >= CARDS_PER_DECK:
        raise _StateError("dealer_draw_cards is empty or holds a byte that is no card (K4.2)")
    try:
        dealer, draws = draw_for_deal(config.players, iter(_cards(cards)))
    except ValueError:
        raise _StateError("dealer_draw_cards run out before a dealer is found (K4.2)") from None
    if len(seats) != len(cards) or draws != tuple(zip(seats, _cards(cards), strict=True)):
        raise _StateError("dealer_draw_seats and dealer_draw_cards are not a draw for deal (K4.2)")
    return dealer


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
    outcome: tuple[bool, tuple[int, ...], tuple[int, ...]]  # match_outcome after the last deal


def _history(config_data: bytes, first_dealer: int, stored: tuple[bytes, ...]) -> _History:
    """The finished deals of a plain token, checked (K13; ``_decode_history``), cached unless many."""
    if len(stored) > CACHED_MATCH_DEALS:
        return _decode_history(config_data, first_dealer, stored)
    return _cached_history(config_data, first_dealer, stored)


def _trusted_results(
    config_data: bytes, first_dealer: int, stored: tuple[bytes, ...]
) -> tuple[DealResult, ...]:
    """The finished deals of a sealed token: its match was checked when it was played, so
    a long history is only put together from its cached deals, without the K13 checks."""
    if len(stored) > CACHED_MATCH_DEALS:
        return tuple(_deal(config_data, first_dealer, i, data) for i, data in enumerate(stored))
    return _cached_history(config_data, first_dealer, stored).results


def _decode_history(config_data: bytes, first_dealer: int, stored: tuple[bytes, ...]) -> _History:
    """Finished deals from their stored items (derived items recomputed, K12.1), then K13."""
    config = _layout(config_data).config
    results = tuple(_deal(config_data, first_dealer, i, data) for i, data in enumerate(stored))
    if not results:
        return _History((), (False, (), ()))
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
    # A tie-break deal decided after the second-last deal ends the match (K13.3).
    return _History(results, match_outcome(config, results, pending))


# Errors are not cached: lru_cache keeps only returned values.
_cached_history = functools.lru_cache(maxsize=1024)(_decode_history)


@functools.lru_cache(maxsize=4096)
def _deal(config_data: bytes, first_dealer: int, i: int, data: bytes) -> DealResult:
    """Finished deal ``i`` of a stored history; errors are not cached."""
    return _result(_layout(config_data).config, first_dealer, i, pb.DealScore.FromString(data))


def _result(config: Config, first_dealer: int, i: int, stored: pb.DealScore) -> DealResult:
    """One finished deal; every card ends in a pile, so item columns add up to the deck's."""
    n, rules = config.players, config.rules
    nordic = rules.nordic_scoring
    lillan_unit = 1 if nordic else 2
    deck_points = deck_card_points(config.copies, nordic)
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
    scores = assemble_scores(
        config,
        [dict(zip(CARD_POINT_ITEMS, row, strict=True)) for row, _, _ in rows],
        [made for _, made, _ in rows],
        recipient,
        first_player if any(table for _, _, table in rows) else None,
    )
    return DealResult(i + 1, dealer, recipient, scores, team_totals(config, scores))
