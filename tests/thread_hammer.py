"""Many threads calling one function at once, switching as often as CPython allows.

The engine and the service API are called in-process from several threads (a bot
or an evaluator with a thread pool): their caches must stay whole and bounded.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable

SWITCH_INTERVAL = 1e-6  # seconds: a thread switch between almost any two bytecodes


def hammer(
    call: Callable[[int, int], object], *, threads: int = 16, seconds: float = 1.0
) -> Counter[str]:
    """``call(thread, i)`` from ``threads`` threads, ``i`` counting each thread's calls,
    for ``seconds``; the errors raised (type and message), counted. The switch
    interval is restored afterwards."""
    errors: Counter[str] = Counter()
    start = threading.Barrier(threads)
    deadline = 0.0

    def work(thread: int) -> None:
        start.wait()
        i = 0
        while time.monotonic() < deadline:
            try:
                call(thread, i)
            except Exception as error:  # every error is a finding, counted
                errors[f"{type(error).__name__}: {error}"[:200]] += 1
            i += 1

    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        deadline = time.monotonic() + seconds
        workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        sys.setswitchinterval(previous)
    return errors
