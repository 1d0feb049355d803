"""Play policies for simulations: pure functions ``(state, rng) -> Move`` for the mover.

A policy sees the whole state but only uses what the mover may know (its hand,
the table, the rules). All chance comes from the ``random.Random`` it is given,
so a seeded generator makes a simulated match reproducible.

>>> import random
>>> from engine.krypkasino import Config, new_game
>>> state = new_game(Config(players=4), seed=7)
>>> greedy_policy(state, random.Random(0)) == greedy_policy(state, random.Random(1))
True
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from engine.cards import Card
from engine.krypkasino.config import Rules
from engine.krypkasino.moves import Move, SweepKind, sweep_kind, sweep_ranks
from engine.krypkasino.play import legal_moves
from engine.krypkasino.scoring import SWEEP_POINTS, card_points
from engine.krypkasino.state import State, remove_cards

Policy = Callable[[State, random.Random], Move]


def random_policy(state: State, rng: random.Random) -> Move:
    """A legal move of the mover, uniformly at random.

    Indexes with ``rng.random()`` rather than ``rng.choice`` for the same
    reason as ``engine.cards.shuffled``: its output from a seed is stable
    across Python versions, so golden transcripts stay valid.
    """
    moves = _moves(state)
    return moves[int(rng.random() * len(moves))]


def table_after(table: Sequence[Card], move: Move) -> tuple[Card, ...]:
    """The table once ``move`` is played (K8.2 crawl, K8.3 capture)."""
    if move.is_crawl:
        return (*table, move.card)
    return remove_cards(tuple(table), move.captures)


def points_taken(table: Sequence[Card], move: Move, rules: Rules) -> int:
    """What a move adds to the mover's deal score: K2.4 card points and K9.1 sweep points.

    A crawl takes nothing; a capture takes the played and the captured cards,
    and every marker it leaves costs the mover 5 (lowest total wins, K13.1).
    """
    if move.is_crawl:
        return 0
    points = sum(card_points((move.card, *move.captures), rules.nordic_scoring).values())
    kind = sweep_kind(table, move)
    markers = {SweepKind.NONE: 0, SweepKind.SWEEP: 1, SweepKind.DOUBLE: 2}[kind]
    return points + SWEEP_POINTS * markers


def leaves_sweepable(table: Sequence[Card], move: Move, rules: Rules) -> bool:
    """Whether some card could sweep the table this move leaves (K14.1 ``sweep_ranks``)."""
    return bool(sweep_ranks(table_after(table, move), rules))


def greedy_policy(state: State, rng: random.Random) -> Move:
    """A cautious one-ply player; ``rng`` is unused (the choice is deterministic).

    In order: never leave a table that the next player could sweep when some
    legal move avoids it; then take the fewest points (``points_taken``: card
    points of the played and captured cards, plus 5 per sweep marker, because
    a sweep costs its maker 5, K9.1); then the first move in canonical order
    (K1.6).
    """
    table, rules = state.table, state.config.rules
    moves = _moves(state)
    return min(
        moves,
        key=lambda move: (
            leaves_sweepable(table, move, rules),
            points_taken(table, move, rules),
        ),
    )


POLICIES: dict[str, Policy] = {"random": random_policy, "greedy": greedy_policy}


def _moves(state: State) -> list[Move]:
    moves = legal_moves(state, state.turn)
    if not moves:
        raise ValueError("no move to choose: the match is over")
    return moves
