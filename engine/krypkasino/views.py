"""What one seat, or an onlooker, may know of a state (design section 3, spec K14)."""

from __future__ import annotations

import threading
from typing import NamedTuple

from engine.cards import Card
from engine.krypkasino.config import CACHED_MATCH_DEALS, Config, seat_number
from engine.krypkasino.events import Captured, Crawled
from engine.krypkasino.moves import sweep_ranks
from engine.krypkasino.scoring import DealResult, last_deal_tiebreak, match_totals
from engine.krypkasino.state import State


class View(NamedTuple):
    """A seat's view (``seat`` set, ``hand`` its cards) or the public view (``seat`` None).

    Hidden from everyone: the stock's order and the face-down pile contents;
    hidden from other seats: each hand. ``sweep_ranks`` (K14.1) are rank
    indices, 0 = ace. ``last_move`` is the event of the match's last move,
    public like every event. ``tiebreak`` names the teams of a tie-break deal
    (K13.3) while it is played and, once the match is over, if its last deal
    was one.

    Immutable like the engine's dataclasses, but a named tuple: every response
    builds one, and a tuple is made in one step where a frozen dataclass sets
    its 25 fields one call at a time.
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
    last_move: Crawled | Captured | None


class _Derived(NamedTuple):
    """View fields that depend only on the config and the finished deals."""

    config: Config
    results: tuple[DealResult, ...]
    distributions: int  # K5.2
    totals: tuple[int, ...]  # K13.1


# A game's states share their config and results objects (as do the states
# decoded from its tokens, see ``service.state_parts``), so the derived fields
# are kept by the identity of both. An entry holds the two objects, so their
# ids cannot be reused while it exists.
# An entry keeps its finished deals alive: only histories of at most
# ``CACHED_MATCH_DEALS`` are kept.
# In-process users (a bot, an evaluator) call ``view`` from several threads at once, so
# the eviction and insertion of a new entry hold ``_DERIVED_LOCK``: unlocked, a thread
# could change the dict under another's ``iter`` (RuntimeError out of ``view``) and two
# threads could evict the same entry and insert two, growing it past its limit for good.
# A hit takes no lock: a lookup cannot see a dict half changed.
_DERIVED: dict[tuple[int, int], _Derived] = {}
_DERIVED_LIMIT = 1024
_DERIVED_LOCK = threading.Lock()


def _derived(config: Config, results: tuple[DealResult, ...]) -> _Derived:
    key = (id(config), id(results))
    found = _DERIVED.get(key)
    if found is None:
        found = _Derived(config, results, config.distributions, match_totals(config, results))
        if len(results) > CACHED_MATCH_DEALS:
            return found
        with _DERIVED_LOCK:
            while len(_DERIVED) >= _DERIVED_LIMIT:
                del _DERIVED[next(iter(_DERIVED))]  # the oldest entry
            _DERIVED[key] = found
    return found


def tiebreak_teams(state: State) -> tuple[int, ...]:
    """K13.3: the teams of the tie-break deal being played or, once the match is over,
    of its last deal if that was one; ``()`` otherwise. Views, ``score`` and the
    ``MatchEnded`` event all take it from here, so they cannot disagree."""
    # Kept once the match is over, when the state forgets it: a results screen must
    # say why the lowest total may not have won.
    return last_deal_tiebreak(state.config, state.results) if state.over else state.tiebreak


def _seat(seat: object, players: int) -> int:
    """``seat`` as an int if it is one of ``players`` seats (numpy's integers too); else
    ValueError."""
    if (number := seat_number(seat, players)) is None:
        raise ValueError(f"seat must be None or a seat from 0 to {players - 1}, not {seat!r}")
    return number


def view(state: State, seat: int | None = None) -> View:
    """The view of ``seat``, or the public view for ``None``.

    ValueError for a seat that is none of the state's (an integer from 0 to n - 1, of
    any integer type but bool): a list index, -1 showed seat n - 1's hand and True
    seat 1's.
    """
    config, results = state.config, state.results
    if seat is not None and not (type(seat) is int and 0 <= seat < config.players):
        seat = _seat(seat, config.players)
    derived = _derived(config, results)
    # Positional, in field order: keywords cost a third more on every response.
    return View(
        config,
        seat,
        () if seat is None else state.hands[seat],  # hand
        state.dealer,
        None if state.over else state.turn,  # turn
        state.deal,
        state.distribution,
        derived.distributions,
        state.last_distribution,
        state.table,
        tuple(map(len, state.hands)),  # hand_sizes
        len(state.stock),  # stock_size
        tuple(map(len, state.piles)),  # pile_sizes
        state.markers,
        state.set_aside,
        state.last_capturer,
        state.bordstabbe_seat,
        sweep_ranks(state.table, config.rules),
        results,
        derived.totals,
        tiebreak_teams(state),
        state.over,
        state.winners,
        state.move_number,
        state.last_move,
    )
