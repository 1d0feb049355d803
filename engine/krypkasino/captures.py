"""Capture options of a played value against a table (spec K7.2, K7.3, K14.1).

The table is reduced to a *value vector*: how many cards of each table value
1..13 it holds, packed four bits per value into one int (at most eight copies
of a rank exist). Suits never matter for which captures are legal, only for
which distinct moves exist (K7.5), so the search runs on values and the moves
layer expands each legal value vector into card multisets.

A capture ``S`` is legal when it is a disjoint union of groups (each summing
to the played value) and the remainder holds no group (K7.3). The search
enumerates the remainders instead: a remainder must be *group-free*, a
property kept incrementally with a bit set of reachable subset sums, so the
search never visits the exponential number of partitions of ``S``.
"""

from __future__ import annotations

from functools import lru_cache

VALUES = 13
_BITS = 4
_FIELD = (1 << _BITS) - 1


def _present(packed: int) -> list[tuple[int, int]]:
    """``(value, count)`` for every value held, highest value first."""
    return [
        (i + 1, n) for i in range(VALUES - 1, -1, -1) if (n := (packed >> (_BITS * i)) & _FIELD)
    ]


def _unit(value: int) -> int:
    return 1 << (_BITS * (value - 1))


def _groups_summing_to(items: list[tuple[int, int]], start: int, target: int) -> list[int]:
    """Packed sub-vectors of ``items[start:]`` whose values sum to ``target``."""
    if target == 0:
        return [0]
    found: list[int] = []
    for k in range(start, len(items)):
        value, count = items[k]
        if value > target:
            continue
        unit = _unit(value)
        taken = 0
        remaining = target
        for _ in range(count):
            taken += unit
            remaining -= value
            if remaining < 0:
                break
            found.extend(taken + rest for rest in _groups_summing_to(items, k + 1, remaining))
    return found


def _decomposable(packed: int, target: int, memo: dict[int, bool]) -> bool:
    """Whether a value vector splits into disjoint groups each summing to ``target``.

    The highest card must belong to some group; trying only the groups that
    contain it makes each split counted once per choice of that group.
    """
    if packed == 0:
        return True
    known = memo.get(packed)
    if known is not None:
        return known
    items = _present(packed)
    top, top_count = items[0]
    rest = target - top
    result = False
    if rest >= 0:
        others = [(top, top_count - 1), *items[1:]] if top_count > 1 else items[1:]
        after_top = packed - _unit(top)
        result = any(
            _decomposable(after_top - group, target, memo)
            for group in _groups_summing_to(others, 0, rest)
        )
    memo[packed] = result
    return result


@lru_cache(maxsize=1 << 16)
def value_options(packed: int, target: int) -> tuple[int, ...]:
    """K7.3 on values: every legal captured value vector, ascending.

    Empty exactly when no group exists (K7.3 last sentence), so the played
    card crawls (K7.4).
    """
    items = [(v, n) for v, n in _present(packed) if v <= target]
    total = sum(v * n for v, n in items)
    if total < target:
        return ()
    limit = (1 << (target + 1)) - 1
    goal = 1 << target
    memo: dict[int, bool] = {}
    options: list[int] = []
    usable = sum(n * _unit(v) for v, n in items)

    def remainders(k: int, reach: int, kept: int, kept_sum: int) -> None:
        # reach: bit j set when some subset of the kept cards sums to j.
        if k == len(items):
            captured = usable - kept
            decomposable = captured and (total - kept_sum) % target == 0
            if decomposable and _decomposable(captured, target, memo):
                options.append(captured)
            return
        value, count = items[k]
        unit = _unit(value)
        remainders(k + 1, reach, kept, kept_sum)
        for _ in range(count):
            reach = (reach | (reach << value)) & limit
            if reach & goal:
                return
            kept += unit
            kept_sum += value
            remainders(k + 1, reach, kept, kept_sum)

    remainders(0, 1, 0, 0)
    return tuple(sorted(options))


def groups(packed: int, target: int) -> list[tuple[int, ...]]:
    """K7.2: every group of a value vector worth ``target``, each as its values, highest
    first (for naming one in a refusal; the legal-move search needs no list of them)."""
    return [
        tuple(v for v, n in _present(group) for _ in range(n))
        for group in _groups_summing_to(_present(packed), 0, target)
    ]


@lru_cache(maxsize=1 << 14)
def sweeps(packed: int, target: int) -> bool:
    """Whether a played value takes the whole table (K7.6: ``T`` decomposable)."""
    if packed == 0:
        return False
    total = sum(v * n for v, n in _present(packed))
    return total % target == 0 and _decomposable(packed, target, {})
