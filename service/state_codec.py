"""The internal ``GameState`` inside state tokens: encoding and decoding (design section 4).

Token format decision (the proto is silent on it): ``GameState.results`` stores
each deal score compactly, per seat only the independent items
(``state_parts.STORED_SEAT_ITEMS``: the card-point items, ``sweeps_made`` and
``bordstabbe``). The derived items (``seat``, ``card_points``, ``total``, ...) and
``team_totals`` are recomputed by the K12.1 formulas when a state is read
(``service.state_parts``), and any stored value of them is ignored, so a later
release may write them without breaking this one. API messages (views, scores,
events) always carry every item.

A plain token's state is checked against the rules before it is built
(``service.plain_state``); states from sealed tokens, which only this service
can make, skip the checks.
"""

from __future__ import annotations

import hashlib

from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from engine.cards import Card
from engine.krypkasino.events import Captured, Crawled
from engine.krypkasino.moves import SweepKind
from engine.krypkasino.scoring import DealResult
from engine.krypkasino.state import State
from service.codec import (
    DEAL_MEMO_SIZE,
    CodecError,
    NewerReleaseError,
    config_to_proto,
    unknown_field_bytes,
)
from service.identity_memo import IdentityMemo
from service.plain_state import check_game_id, check_plain_state
from service.state_parts import (
    StateError,
    as_cards,
    config_layout,
    stored_seat_score,
    trusted_results,
)


def _compact(result: DealResult) -> pb.DealScore:
    """A deal score as stored in tokens: only the items the others derive from (K12.1)."""
    return pb.DealScore(
        deal_number=result.number,
        dealer=result.dealer,
        recipient=result.recipient,
        seats=[stored_seat_score(s) for s in result.scores],
    )


# Every Play of a match stores its finished deals again: kept per deal (service.identity_memo).
_compact_result = IdentityMemo(_compact, DEAL_MEMO_SIZE)


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
    if (last := state.last_move) is not None:
        played = msg.last_move
        played.seat = last.seat
        if isinstance(last, Crawled):
            played.cards = bytes((last.card,))
        else:
            played.cards = bytes((last.card, *last.captures))
            if last.sweep is not SweepKind.NONE:
                played.markers = last.sweep.markers
    return msg


def state_id(serialized_state: bytes) -> str:
    """16 hex digits of SHA-256 of a serialized ``GameState``, for optimistic concurrency."""
    return hashlib.sha256(serialized_state).hexdigest()[:16]


def state_from_proto(msg: pb.GameState, *, trusted: bool = False) -> tuple[State, str]:
    """``(state, game_id)`` of a ``GameState``, checked against the rules first.

    ``trusted`` skips the consistency checks: for states that came out of a
    sealed token, which AES-GCM proves this service made. A plain-mode token
    can hold anything, so without ``trusted`` this raises ``CodecError`` with
    field ``state`` and a precise description for any inconsistency that
    ``service.plain_state`` checks for, and never another exception type.

    Either way, its subclass ``NewerReleaseError`` when the state holds fields
    or enum values this release does not know: a newer release wrote them, and
    decoding would drop them (the next seal would lose them for good) or could
    not read them.
    """
    if unknown_field_bytes(msg):
        raise NewerReleaseError("the state holds fields this release does not know")
    try:
        if trusted:
            return _trusted_state(msg), msg.game_id
        state = _trusted_state(msg, check_plain_state(msg))
        check_game_id(msg.game_id)
        return state, msg.game_id
    except StateError as error:
        raise CodecError("state", str(error)) from None


_serialize_deal = pb.DealScore.SerializeToString
_SWEEP_OF_MARKERS = {kind.markers: kind for kind in SweepKind}


def _last_move(played: pb.PlayedMove, players: int) -> Crawled | Captured:
    """The event of a stored last move."""
    seat = played.seat
    card, *captures = played.cards
    if not captures:
        return Crawled(seat, Card(card))
    sweep = _SWEEP_OF_MARKERS.get(played.markers)
    if sweep is None:  # a plain token's are checked: a newer release sealed this one
        raise NewerReleaseError(f"the state's last move left {played.markers} sweep markers")
    return Captured.of(seat, Card(card), tuple(map(Card, captures)), sweep, players)


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
            trusted_results(config_data, first_dealer, tuple(map(_serialize_deal, stored)))
            if stored
            else ()
        )
    draw = msg.dealer_draw_cards
    config = config_layout(config_data).config
    return State(
        config=config,
        seed=msg.seed,
        decks=tuple(map(as_cards, msg.decks)),
        first_dealer=first_dealer,
        dealer_draw=tuple(zip(msg.dealer_draw_seats, as_cards(draw), strict=True)) if draw else (),
        deal=msg.deal,
        dealer=msg.dealer,
        distribution=msg.distribution,
        stock=as_cards(msg.stock),
        hands=tuple(map(as_cards, msg.hands)),
        table=as_cards(msg.table),
        set_aside=as_cards(msg.set_aside),
        piles=tuple(map(as_cards, msg.piles)),
        markers=tuple(map(as_cards, msg.markers)),
        turn=msg.turn,
        last_capturer=msg.last_capturer if msg.HasField("last_capturer") else None,
        bordstabbe_seat=msg.bordstabbe_seat if msg.HasField("bordstabbe_seat") else None,
        results=results,
        tiebreak=tuple(msg.tiebreak),
        winners=tuple(msg.winners),
        over=msg.over,
        move_number=msg.move_number,
        last_move=_last_move(msg.last_move, config.players) if msg.HasField("last_move") else None,
    )
