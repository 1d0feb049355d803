"""``service.watchdog``: the heartbeats workers stamp and the supervisor reads
(docs/operations.md "Workers"), and that a hung worker is killed once; the killing of
real workers is tested in test_process_lifecycle."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import structlog.testing

from service.watchdog import BEAT_SECONDS, Heartbeats, keep_beating, overdue, start_watchdog


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def beats(clock: Clock) -> Heartbeats:
    """Three workers' heartbeats, stamped by ``clock``."""
    return Heartbeats(3, clock)


def silences(beats: Heartbeats) -> list[float]:
    return [beats.silent_for(worker) for worker in (1, 2, 3)]


def test_every_worker_starts_as_if_it_beat_when_the_slots_were_made(
    clock: Clock, beats: Heartbeats
) -> None:
    clock.now += 4
    assert silences(beats) == [4, 4, 4]


def test_a_beat_resets_only_its_own_worker(clock: Clock, beats: Heartbeats) -> None:
    clock.now += 4
    beats.beat(2)
    clock.now += 1
    assert silences(beats) == [5, 1, 5]


def test_overdue_names_the_workers_silent_for_longer_than_the_timeout(
    clock: Clock, beats: Heartbeats
) -> None:
    clock.now += 3
    beats.beat(1)
    clock.now += 0.5
    beats.beat(3)
    clock.now += 1
    workers = {1001: 1, 1002: 2, 1003: 3}  # worker by pid
    assert overdue(workers, beats, timeout=3) == [(1002, 2, 4.5)]
    assert overdue(workers, beats, timeout=4.5) == []  # longer than, not as long as
    assert overdue({1001: 1, 1003: 3}, beats, timeout=0.9) == [(1001, 1, 1.5), (1003, 3, 1.0)]


def test_overdue_counts_only_the_silence_the_watch_was_running_for(
    clock: Clock, beats: Heartbeats
) -> None:
    """After a pause of the whole server the watch has seen ``watched_for`` seconds of it."""
    clock.now += 30
    workers = {1001: 1, 1002: 2, 1003: 3}
    assert overdue(workers, beats, timeout=10, watched_for=1.5) == []
    assert overdue(workers, beats, timeout=10, watched_for=12) == [
        (1001, 1, 12),
        (1002, 2, 12),
        (1003, 3, 12),
    ]


# Python 3.12 on warns at a fork of a process with threads (pytest's may have some); the
# child only writes its beat and exits, and the supervisor forks before any thread starts.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_worker_beats_into_the_supervisors_memory(clock: Clock, beats: Heartbeats) -> None:
    clock.now += 10
    pid = os.fork()
    if pid == 0:
        beats.beat(2)
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    assert silences(beats) == [10, 0, 10]


def test_a_running_loop_keeps_beating() -> None:
    stamps: list[float] = []

    async def run_for(seconds: float) -> None:
        loop = asyncio.get_running_loop()
        keep_beating(loop, lambda: stamps.append(loop.time()))
        await asyncio.sleep(seconds)

    asyncio.run(run_for(2.2 * BEAT_SECONDS))
    # At once, then every BEAT_SECONDS (a busy machine may run the third late).
    assert 2 <= len(stamps) <= 3, stamps
    gaps = [later - earlier for earlier, later in itertools.pairwise(stamps)]
    assert all(gap >= BEAT_SECONDS - 0.01 for gap in gaps), gaps


def test_a_worker_whose_kill_has_not_yet_taken_effect_is_killed_and_logged_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker in uninterruptible sleep dies only as it leaves it, so it stays among the
    workers after its SIGKILL: it must not be killed and logged again every round (a
    mutation review). A zombie stands for it: ``os.kill`` succeeds on it, and nobody
    reaps it until the end."""
    kills: list[tuple[int, int]] = []
    real_kill = os.kill

    def kill(pid: int, sig: int) -> None:
        kills.append((pid, sig))
        real_kill(pid, sig)

    monkeypatch.setattr("service.watchdog.os.kill", kill)
    zombie = subprocess.Popen(["true"])
    time.sleep(0.3)
    end = start_watchdog({zombie.pid: 1}, Heartbeats(1), timeout=1.2)
    try:
        with structlog.testing.capture_logs() as logged:
            time.sleep(4.5)  # overdue after about 1.5 s, then six more rounds
    finally:
        end()
        zombie.wait()
    assert [line["event"] for line in logged] == ["worker hung"]
    assert kills == [(zombie.pid, signal.SIGKILL)]


def test_the_beat_is_every_half_second_as_the_docs_say() -> None:
    operations = " ".join(
        (Path(__file__).parents[2] / "docs" / "operations.md").read_text().split()
    )
    assert "into memory it shares with the supervisor every half second" in operations
    assert BEAT_SECONDS == 0.5


class SteppedBeats(Heartbeats):
    """Heartbeats whose watch takes a round only when the test says, at the time the
    test says: each round begins with one ``now()``, which waits for ``step``."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(1, clock)
        self._clock_of_test = clock
        self._waiting = threading.Semaphore(0)
        self._go = threading.Semaphore(0)

    def now(self) -> float:
        self._waiting.release()  # the round before is over
        self._go.acquire()
        return super().now()

    def step(self, moment: float) -> None:
        """Once the watch waits for its next round, let it take it at ``moment``."""
        assert self._waiting.acquire(timeout=30), "the watch took no next round"
        self._clock_of_test.now = moment
        self._go.release()

    def end(self, end_watch: Callable[[], None]) -> None:
        """End the watch, and let a round it waits to take go (the clock unchanged)."""
        end_watch()
        self._go.release()


def test_a_pause_of_more_than_half_the_timeout_restarts_the_count_and_the_rest_counts(
    clock: Clock,
) -> None:
    """docs/operations.md ("Workers"): after a pause of the whole server its count
    starts again, and then a silent worker is killed as ever. A pause is a round that
    comes more than half the timeout after the one before (a mutation review found the
    whole timeout instead passed: with a 2 s timeout, 0.4 s of silence and a pause of
    1.8 s killed a worker that had been silent 0.4 s while the watch ran)."""
    worker = subprocess.Popen(["sleep", "30"])
    beats = SteppedBeats(clock)  # the worker beats at 100.0
    end = start_watchdog({worker.pid: 1}, beats, timeout=2.0)
    try:
        with structlog.testing.capture_logs() as logged:
            beats.step(100.0)  # the watch begins
            beats.step(100.4)
            beats.step(102.2)  # 1.8 s later: a pause of the whole server
            for moment in (103.1, 104.0, 104.9):  # 2.7 s of silence counted since
                beats.step(moment)
            worker.wait(30)
    finally:
        beats.end(end)
        worker.kill()
        worker.wait()
    assert worker.returncode == -signal.SIGKILL
    assert [(line["event"], line["silent_seconds"]) for line in logged] == [("worker hung", 2.7)]


def test_a_worker_already_reaped_does_not_end_the_watch() -> None:
    """The supervisor's thread reaps a worker that exits while the watch holds its pid:
    killing it meets ProcessLookupError, and the watch must go on to kill the others."""
    reaped = subprocess.Popen(["true"])
    reaped.wait()
    hung = subprocess.Popen(["sleep", "30"])
    end = start_watchdog({reaped.pid: 1, hung.pid: 2}, Heartbeats(2), timeout=1.2)
    try:
        with structlog.testing.capture_logs() as logged:
            hung.wait(30)
            deadline = time.monotonic() + 30  # the lines come after every kill of the round
            while len(logged) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
    finally:
        end()
        hung.kill()
        hung.wait()
    assert hung.returncode == -signal.SIGKILL
    assert sorted(line["worker"] for line in logged) == [1, 2]
