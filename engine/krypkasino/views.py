"""What one seat, or an onlooker, may know of a state (design section 3, spec K14)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.cards import Card
from engine.krypkasino.config import Config
from engine.krypkasino.moves import sweep_ranks
from engine.krypkasino.scoring import DealResult, match_totals
from engine.krypkasino.state import State


@dataclass(frozen=True, slots=True)
class View:
    """A seat's view (``seat`` set, ``hand`` its cards) or the public view (``seat`` None).

    Hidden from everyone: the stock's order and the face-down pile contents;
    hidden from other seats: each hand. ``sweep_ranks`` (K14.1) are rank
    indices, 0 = ace.
    """

    config: Config
    seat: int | None
    hand: tuple[Card, ...]
    dealer: int
    turn: int | None
    deal: int
    distribution: int
    distributions: int
    last_distribution: bool
    table: tuple[Card, ...]
    hand_sizes: tuple[int, ...]
    stock_size: int
    pile_sizes: tuple[int, ...]
    markers: tuple[tuple[Card, ...], ...]
    set_aside: tuple[Card, ...]
    last_capturer: int | None
    bordstabbe_seat: int | None
    sweep_ranks: tuple[int, ...]
    results: tuple[DealResult, ...]
    totals: tuple[int, ...]
    tiebreak: tuple[int, ...]
    over: bool
    winners: tuple[int, ...]
    move_number: int


def view(state: State, seat: int | None = None) -> View:
    """The view of ``seat``, or the public view for ``None``."""
    config = state.config
    return View(
        config=config,
        seat=seat,
        hand=() if seat is None else state.hands[seat],
        dealer=state.dealer,
        turn=None if state.over else state.turn,
        deal=state.deal,
        distribution=state.distribution,
        distributions=config.distributions,
        last_distribution=state.last_distribution,
        table=state.table,
        hand_sizes=tuple(len(h) for h in state.hands),
        stock_size=len(state.stock),
        pile_sizes=tuple(len(p) for p in state.piles),
        markers=state.markers,
        set_aside=state.set_aside,
        last_capturer=state.last_capturer,
        bordstabbe_seat=state.bordstabbe_seat,
        sweep_ranks=sweep_ranks(state.table, config.rules),
        results=state.results,
        totals=match_totals(config, state.results),
        tiebreak=state.tiebreak,
        over=state.over,
        winners=state.winners,
        move_number=state.move_number,
    )
