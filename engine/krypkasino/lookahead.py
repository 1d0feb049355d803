"""What the next seat plays to once the mover plays a move (K8, K10.1, K6, K11.2).

``LegalMoves`` announces it with each legal move (``sweep_ranks_after``, K14.1), and
the play policies look ahead with ``table_after``.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.cards import Card
from engine.krypkasino.dealing import split_removal
from engine.krypkasino.moves import Move, sweep_ranks, sweep_ranks_left
from engine.krypkasino.state import State, remove_cards


def table_after(table: Sequence[Card], move: Move) -> tuple[Card, ...]:
    """The table once ``move`` is played (K8.2 crawl, K8.3 capture)."""
    if move.is_crawl:
        return (*table, move.card)
    return remove_cards(tuple(table), move.captures)


def ends_distribution(state: State) -> bool:
    """Whether the mover holds the distribution's last card: every other hand is empty
    (K10.1; the dealer plays last, K15.3)."""
    return sum(map(len, state.hands)) == 1


def next_table(state: State, move: Move) -> tuple[Card, ...]:
    """The table the next seat plays to once the mover plays ``move``.

    The one the move leaves (K8), less K6 removal when it is the distribution's
    last card (K10.1: the next seat, ``next(dealer)``, plays after the deal and
    removal); empty when it ends the deal, whose table goes to the recipient
    (K11.2) and nobody plays to.
    """
    table = table_after(state.table, move)
    if not ends_distribution(state):
        return table
    if not state.stock:
        return ()
    return split_removal(table, state.config.rules.removal)[0]


def sweep_ranks_after(state: State, moves: Sequence[Move]) -> list[tuple[int, ...]]:
    """K14.1 ``sweep_ranks`` of each move's ``next_table``: what the view shows once it
    is played, unless it ends the deal (then nothing)."""
    rules = state.config.rules
    if not ends_distribution(state):
        # The usual case: sweep_ranks(table_after(...)) of each, from packed values.
        return sweep_ranks_left(state.table, moves, rules)
    return [sweep_ranks(next_table(state, move), rules) for move in moves]
