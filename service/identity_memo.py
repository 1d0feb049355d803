"""Values memoized by the identity of the object they are computed from.

A finished deal (``DealResult``) is converted on every request of its match:
into the compact form that state tokens store, and into the full score sheet
(K12.1) that views and ``Score`` carry. Keyed by the deal itself, a cache
hashes every item of every seat at each lookup, which cost about as much as
the conversion; the decoded tokens of a match share their deal objects
(``service.state_parts`` caches them by their bytes), so the identity of a
deal is a cheap and exact key. Without a cache a ``Play`` late in a long
match converted every finished deal again: over a millisecond at deal 50 of
a 6-player match (docs/benchmarks.md, "Long matches").

In-process users of the service API may call it from several threads at once,
so a memo adds an entry, and evicts to make room, under its lock (a hit takes
none: a lookup cannot see a dict half changed). Unlocked, two threads evicting
the same oldest entry made one of them raise KeyError, a thread changing the
dict under another's ``iter`` raised RuntimeError, and the memo outgrew its limit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

KeyT = TypeVar("KeyT")
ValueT = TypeVar("ValueT")


class IdentityMemo(Generic[KeyT, ValueT]):
    """``compute(key)``, remembered for the object ``key`` (not for equal objects).

    Each entry holds its key object, so the object's id cannot be reused while
    the entry exists. At most ``limit`` entries; the oldest goes first.
    """

    def __init__(self, compute: Callable[[KeyT], ValueT], limit: int) -> None:
        if limit < 1:  # a memo of no entries would fail at its first call, far from here
            raise ValueError(f"an IdentityMemo holds at least one entry, not {limit}")
        self._compute = compute
        self._limit = limit
        self._entries: dict[int, tuple[KeyT, ValueT]] = {}
        self._lock = threading.Lock()

    def __call__(self, key: KeyT) -> ValueT:
        entry = self._entries.get(id(key))
        if entry is not None:
            return entry[1]
        value = self._compute(key)
        with self._lock:
            while len(self._entries) >= self._limit:
                # Dicts keep insertion order, so the first key is the oldest entry's.
                del self._entries[next(iter(self._entries))]
            self._entries[id(key)] = (key, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)
