"""The engine's legal move set against the naive reference on big reachable tables (K7.1-K7.7,
K14.1, K1.6).

``test_reference.py`` compares them on random tables of at most 9 cards. Real
tables reach 18, and 10 to 18 cards is where subset-sum captures, the
maximality of K7.3 and forced sweeps (K7.6) get hard. ``big_tables`` finds such
positions by legal play in real games, in bounded time; this module checks that
it still finds what it claims, and compares the engine with the reference on a
sample of them, under each position's own rules.

The reference takes up to about a second on a 16-card table, so the comparison
is bounded by a count of positions, not by time: ``COMPARED`` positions, drawn
from the positions of ``GAMES`` searched games (``FUZZ_SCALE`` multiplies both;
nothing else is left out). The configurations take turns in the sample, and
inside each its largest tables, those whose mover can sweep and each smaller
size, so every configuration, the biggest tables and forced sweeps are compared
even in CI (20 positions of 11 to 16 cards, each configuration once or twice,
the reference taking 5 to 6 s; the search about 2 s).
"""

from __future__ import annotations

import random
from collections import Counter
from functools import cache

from engine.krypkasino import Config, sweep_ranks, table_moves
from service.plain_state import MAX_PLAIN_TABLE
from tests.engine.krypkasino import reference
from tests.engine.krypkasino.big_tables import BIG, CONFIGS, BigTable, big_tables
from tests.sizes import fuzz_examples

GAMES = fuzz_examples(len(CONFIGS))
"""Searched games, one of each configuration in CI."""
COMPARED = fuzz_examples(20)
"""Positions compared with the reference."""
WIDTH = 4
"""The beam's width: 4 finds 16-card tables in the CI games in about two seconds."""


@cache
def _found() -> tuple[BigTable, ...]:
    return tuple(big_tables(range(GAMES), width=WIDTH))


def _must_sweep(position: BigTable) -> bool:
    """K7.6: some card of the mover's hand takes the whole table (forced unless
    ``no_forced_sweep``)."""
    ranks = sweep_ranks(position.table, position.rules)
    return any(card >> 2 in ranks for card in position.hand)


def _interleaved(queues: list[list[BigTable]], count: int) -> list[BigTable]:
    """Up to ``count`` positions, one of each queue in turn."""
    taken: list[BigTable] = []
    while len(taken) < count and any(queues):
        for queue in queues:
            if queue and len(taken) < count:
                taken.append(queue.pop(0))
    return taken


def _sample(found: tuple[BigTable, ...], count: int) -> list[BigTable]:
    """``count`` positions: the configurations take turns, and each one's strata take
    turns: its largest tables, those whose mover can sweep, then each smaller size;
    each stratum in a fixed random order."""
    strata: dict[Config, dict[int, list[BigTable]]] = {}
    for position in found:
        key = 0 if _must_sweep(position) else len(position.table)  # 0: the mover can sweep
        strata.setdefault(position.config, {}).setdefault(key, []).append(position)
    rng = random.Random(0)
    queues: list[list[BigTable]] = []
    for by_key in strata.values():
        sizes = sorted((key for key in by_key if key), reverse=True)
        order = sizes[:1] + ([0] if 0 in by_key else []) + sizes[1:]
        for key in order:
            rng.shuffle(by_key[key])
        queues.append(_interleaved([by_key[key] for key in order], len(found)))
    return _interleaved(queues, count)


def test_big_tables_are_found():
    """The builder still reaches what this module claims to cover (the CI games find
    1,071 positions: 462 of 12 cards or more, 107 of 14 or more, 12 of 16, 7 where
    the mover can sweep), in every configuration, and never beyond the plain token's
    bound of 20 cards."""
    found = _found()
    sizes = Counter(len(p.table) for p in found)
    assert min(sizes) >= BIG
    assert sum(n for size, n in sizes.items() if size >= 12) >= 300, sizes
    assert sum(n for size, n in sizes.items() if size >= 14) >= 60, sizes
    assert max(sizes) >= 16, sizes
    assert max(sizes) <= MAX_PLAIN_TABLE, "a reachable table that plain tokens refuse"
    assert sum(map(_must_sweep, found)) >= 5, "K7.6 on big tables"
    assert {p.config for p in found} == set(CONFIGS), "every configuration"


def test_big_tables_are_reachable():
    """Each sampled position is the one ``play`` (K7.8: only legal moves) reaches from
    ``new_game`` with the position's deck."""
    for position in _sample(_found(), COMPARED):
        state = position.replay()
        assert state.deal == 1 and not state.over, str(position)
        assert state.hands[state.turn] == position.hand, str(position)
        assert state.table == position.table, str(position)


def test_big_tables_equal_reference():
    """K7.7 and K14.1 on big tables: the engine's legal set is the reference's, in
    canonical order, once each and never empty, and so are the sweep ranks."""
    sample = _sample(_found(), COMPARED)
    assert len(sample) == min(COMPARED, len(_found()))
    assert max(len(p.table) for p in sample) == max(len(p.table) for p in _found())
    assert {p.config for p in sample} == set(CONFIGS)
    assert any(map(_must_sweep, sample)), "K7.6"
    for position in sample:
        hand, table, rules = position.hand, position.table, position.rules
        got = table_moves(hand, table, rules)
        assert got == reference.legal_moves(hand, table, rules), str(position)
        assert got == sorted(set(got)), "K1.6/K7.5: canonical order without duplicates"
        assert got, "K7.8: never empty while the mover holds a card"
        assert sweep_ranks(table, rules) == reference.sweep_ranks(table, rules), str(position)
