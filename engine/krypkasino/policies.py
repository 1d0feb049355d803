"""Play policies for simulations: pure functions ``(situation, rng) -> Move`` for the mover.

A policy sees only what the mover may know: the table, the rules and its
legal moves (a ``Situation``), so the same policy plays in-process and
through the service. All chance comes from the ``random.Random`` it is given,
so a seeded generator makes a simulated match reproducible.

>>> import random
>>> from engine.krypkasino import Config, new_game
>>> now = Situation.of(new_game(Config(players=4), seed=7))
>>> greedy_policy(now, random.Random(0)) == greedy_policy(now, random.Random(1))
True
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.cards import Card
from engine.krypkasino.config import Rules
from engine.krypkasino.lookahead import table_after
from engine.krypkasino.moves import Move, sweep_kind, sweep_ranks
from engine.krypkasino.play import legal_moves
from engine.krypkasino.scoring import SWEEP_POINTS, card_points
from engine.krypkasino.state import State


@dataclass(frozen=True, slots=True)
class Situation:
    """What the mover knows when choosing: the table, the rules, its legal moves (K7.7)."""

    table: tuple[Card, ...]
    rules: Rules
    legal: tuple[Move, ...]

    @classmethod
    def of(cls, state: State) -> Situation:
        """The mover's situation in an engine state."""
        legal = legal_moves(state, state.turn)
        if not legal:
            raise ValueError("no move to choose: the match is over")
        return cls(state.table, state.config.rules, tuple(legal))


Policy = Callable[[Situation, random.Random], Move]


def random_policy(situation: Situation, rng: random.Random) -> Move:
    """A legal move of the mover, uniformly at random.

    Indexes with ``rng.random()`` rather than ``rng.choice`` for the same
    reason as ``engine.cards.shuffled``: its output from a seed is stable
    across Python versions, so golden transcripts stay valid.
    """
    moves = situation.legal
    return moves[int(rng.random() * len(moves))]


def points_taken(table: Sequence[Card], move: Move, rules: Rules) -> int:
    """What a move adds to the mover's deal score: K2.4 card points and K9.1 sweep points.

    A crawl takes nothing; a capture takes the played and the captured cards,
    and every marker it leaves costs the mover 5 (lowest total wins, K13.1).
    """
    if move.is_crawl:
        return 0
    points = sum(card_points((move.card, *move.captures), rules.nordic_scoring).values())
    kind = sweep_kind(table, move)
    return points + SWEEP_POINTS * kind.markers


def leaves_sweepable(table: Sequence[Card], move: Move, rules: Rules) -> bool:
    """Whether some card could sweep the table this move leaves (K14.1 ``sweep_ranks``)."""
    return bool(sweep_ranks(table_after(table, move), rules))


def greedy_policy(situation: Situation, rng: random.Random) -> Move:
    """A one-ply player; ``rng`` is unused (the choice is deterministic).

    In order: take the fewest points (``points_taken``: card points of the
    played and captured cards, plus 5 per sweep marker, because a sweep costs
    its maker 5, K9.1); among those, leave a table that the next player could
    sweep, since K7.6 forces him to if he holds the card and K9.1 then pays
    this player 5 (KD2); then the first move in canonical order (K1.6).
    """
    table, rules = situation.table, situation.rules
    return min(
        situation.legal,
        key=lambda move: (
            points_taken(table, move, rules),
            not leaves_sweepable(table, move, rules),
        ),
    )


POLICIES: dict[str, Policy] = {"random": random_policy, "greedy": greedy_policy}
