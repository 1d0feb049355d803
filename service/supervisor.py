"""The supervisor of ``--workers N`` (design section 6: one process per core, forked
before any server starts, sharing the ports with SO_REUSEPORT).

It forks the workers, each of which runs ``service.server.run_servers`` as a single
process does, with a ``SupervisorLink`` to follow; then serves the metrics of all of
them (prometheus multiprocess mode), forwards the stop signals, kills a worker whose
event loop stops running (``service.watchdog``) and reaps them. ``service.server.serve``
starts it once the ports are claimed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import socket
import time

from prometheus_client import CollectorRegistry

from service.config import MULTIPROC_ENV, ServerConfig
from service.logs import bind_process_fields, get_logger, status_or_crash
from service.metrics import add_workers_process_metrics, multiprocess_registry, worker_exited
from service.server import SupervisorLink, _start_metrics, new_metrics, run_servers
from service.signals import signals_blocked
from service.start_signals import STOP_SIGNALS, PendingSignals
from service.tokens import KeyRing
from service.watchdog import Heartbeats, start_watchdog

# The supervisor is the server process of --workers N: its lines carry the server's
# logger name, as a single process's do.
_log = get_logger("cardrules.server")

#: The signals the supervisor's main thread takes (``_supervise``), which every thread of
#: the supervisor blocks: the stop signals, and SIGCHLD, a worker's exit.
_SUPERVISOR_SIGNALS = (*STOP_SIGNALS, signal.SIGCHLD)


#: How long after the drain delay and the grace period a supervisor waits for its
#: workers before it kills them (``_supervise``).
STOP_MARGIN_SECONDS = 5.0


def _supervise(
    config: ServerConfig, keys: KeyRing, pending: PendingSignals, claims: list[socket.socket]
) -> int:
    """Fork the workers, serve their aggregated metrics, forward stop signals, reap them.

    Workers are not restarted one by one: when one exits on its own (a crash,
    ``kill -9``), the supervisor stops the others and exits 1, so that the
    orchestrator restarts the whole server (docs/operations.md "Workers"). So does
    one whose event loop stops running for ``config.worker_timeout_seconds`` while
    serving: it is killed (``service.watchdog``). Workers still running ``STOP_MARGIN_SECONDS``
    after the drain delay and grace period that followed the first stop signal are
    killed, with the same exit status.

    The main thread takes its signals itself, one at a time, between its own steps
    (``sigtimedwait``), and every thread blocks them. Handlers ran wherever the main
    thread was, also in the middle of the handler of the signal before: a second stop
    signal that came while the first ended the watch met the lock the first held there,
    and the supervisor waited for it for good, serving on.
    """
    if MULTIPROC_ENV not in os.environ:
        raise RuntimeError("workers need PROMETHEUS_MULTIPROC_DIR set before start-up")
    # Inherited as ignored, the kernel would reap the workers unseen (no SIGCHLD, and
    # waitpid fails once all are gone): one killed would go unnoticed.
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    workers, heartbeats = _fork_workers(config, keys, claims)
    # Blocked before any thread starts (the watchdog, the metrics server and each scrape's),
    # as a thread inherits the mask of the thread that starts it. A signal that came before
    # is in ``pending``: pthread_sigmask runs the handlers of those taken but not yet handled.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SUPERVISOR_SIGNALS)
    end_watch = (
        start_watchdog(workers, heartbeats, config.worker_timeout_seconds)
        if config.worker_timeout_seconds
        else lambda: None
    )
    deadline: float | None = None

    def forward(signum: int) -> None:
        nonlocal deadline
        if deadline is not None and signum != signal.SIGINT:
            return  # the workers already drain; a second SIGTERM could catch one exiting
        if deadline is None:
            margin = config.drain_delay_seconds + config.grace_seconds + STOP_MARGIN_SECONDS
            deadline = time.monotonic() + margin
            # From now on the deadline judges the workers: a worker whose event loop has
            # ended is still exiting, silent, and the watch would kill it as hung.
            end_watch()
            # The next server may claim the ports: while the workers still listen, the
            # test bind refuses it (``service.ports.taken``); held through the drain, the
            # claim kept a restart off ports nobody listened on any more, for the grace
            # period.
            for claim in claims:
                claim.close()
        for pid in list(workers):
            with contextlib.suppress(ProcessLookupError):  # exited, not yet reaped
                os.kill(pid, signum)

    for signum in pending.received:
        forward(signum)
    status = 0
    registry = multiprocess_registry()
    add_workers_process_metrics(registry, workers)
    stop_metrics = _start_metrics(config, keys, registry)
    if stop_metrics is None:
        status = 1
        # Nothing was served yet: no drain delay, unless the workers ignore SIGINT too.
        forward(signal.SIGINT if signal.SIGINT in pending.signals else signal.SIGTERM)
    taken = {*pending.signals, signal.SIGCHLD}
    stragglers_killed = False
    while workers:
        pid, wait_status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:  # no worker has exited: wait for a signal, or for the deadline
            left = None if deadline is None or stragglers_killed else deadline - time.monotonic()
            if left is not None and left <= 0:
                stragglers_killed = True
                _kill_stragglers(workers)
                continue
            info = signal.sigwaitinfo(taken) if left is None else signal.sigtimedwait(taken, left)
            if info is not None and info.si_signo != signal.SIGCHLD:
                forward(info.si_signo)
            continue
        worker = workers.pop(pid, None)
        if worker is None:
            continue  # an orphan the supervisor reaped as PID 1 (a container), no worker
        worker_exited(pid)
        code = os.waitstatus_to_exitcode(wait_status)
        if code != 0 or deadline is None:
            killed_by = signal.Signals(-code).name if code < 0 else None
            _log.error("worker exited", worker=worker, pid=pid, exit_code=code, signal=killed_by)
            status = 1
            forward(signal.SIGTERM)
    # Ignored from now on, set while still blocked: Python resets its own handlers to the
    # default action as it exits, and a repeat would end a clean stop with 143.
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if stop_metrics is not None:
        stop_metrics()
    _log_exit(status)
    return status


def _log_exit(status: int) -> None:
    """The supervisor's last line (docs/operations.md "Workers"): without it a stop
    that a dead worker caused ended on a surviving worker's ``stopped``."""
    log = _log.info if status == 0 else _log.error
    log("supervisor stopped", pid=os.getpid(), exit_status=status)


def _kill_stragglers(workers: dict[int, int]) -> None:
    """Kill the workers left at the deadline. A hung worker (stopped, deadlocked) would keep
    the supervisor, and with it the pod, waiting for good, while the kernel still gives it
    connections. Killed before the log line: a log reader that stalls every write would
    stall the supervisor at it."""
    for pid in list(workers):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    # Not ``workers``, the count of ``starting workers``: one name, one type.
    _log.error("workers did not stop in time", unstopped_workers=sorted(workers.values()))


def _fork_workers(
    config: ServerConfig, keys: KeyRing, claims: list[socket.socket]
) -> tuple[dict[int, int], Heartbeats]:
    """Fork ``config.workers`` workers; each runs ``run_servers`` and exits with its status.

    Returns each worker's number (1 to N) by pid, and the heartbeats they stamp;
    every log line of a worker carries its number as ``worker``. Stop signals
    stay blocked across the forks, so one that comes meanwhile waits until each
    process has its own handlers: a child must never run the supervisor's, nor
    die of the default action.
    Each worker gets the read end of a lifeline pipe whose write end only the
    supervisor keeps open, for as long as it lives (``_follow_supervisor``), and
    closes its copy of the ports' ``claims`` (``service.ports.claim``), which only the
    supervisor holds.
    """
    workers: dict[int, int] = {}
    heartbeats = Heartbeats(config.workers)
    lifeline, held = os.pipe()
    with signals_blocked(STOP_SIGNALS) as mask:
        for worker in range(1, config.workers + 1):
            pid = os.fork()
            if pid == 0:
                os.close(held)
                for claim in claims:
                    claim.close()
                pending = PendingSignals()
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                bind_process_fields(worker=worker)
                link = SupervisorLink(lifeline, functools.partial(heartbeats.beat, worker))
                os._exit(_run_worker(config, keys, pending, link))
            workers[pid] = worker
    os.close(lifeline)
    # ``held`` is never closed here: the kernel closes it when the supervisor exits,
    # however it dies.
    return workers, heartbeats


def _run_worker(
    config: ServerConfig, keys: KeyRing, pending: PendingSignals, supervisor: SupervisorLink
) -> int:
    # A registry of its own: in multiprocess mode values go to the shared files.
    return status_or_crash(
        lambda: asyncio.run(
            run_servers(config, keys, new_metrics(CollectorRegistry()), pending, supervisor)
        ),
        _log,
        "worker crashed",
    )
