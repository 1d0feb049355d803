"""What ``/proc`` tells of a running server: CPU time, memory, descriptors and threads of
a process and of the processes it forked (its workers). Linux only, as the benchmarks are."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class Footprint:
    """One process at one moment."""

    pid: int
    rss_kib: int  # VmRSS: resident now
    hwm_kib: int  # VmHWM: the most it was ever resident
    fds: int  # entries of /proc/PID/fd
    threads: int  # entries of /proc/PID/task
    cpu_seconds: float  # user + system, since the process started


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of ``pid`` (``/proc/<pid>/stat``), in seconds."""
    return cpu_ticks((PROC / str(pid) / "stat").read_text()) / os.sysconf("SC_CLK_TCK")


def cpu_ticks(stat: str) -> int:
    """User and system CPU time in a ``/proc/<pid>/stat`` line (utime and stime, fields 14
    and 15; not the children's, 16 and 17), in clock ticks."""
    # The command name, in parentheses, may hold spaces: the fields follow its last ")".
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


# What reading a process's files raises once it is gone: no file, or, reaped between the
# open and the read, ESRCH (a hang report in CI met that; ``footprint`` already knew).
_GONE = (FileNotFoundError, ProcessLookupError)


def is_running(pid: int) -> bool:
    """Whether ``pid`` runs: it exists and is no zombie (ended, not yet reaped)."""
    try:
        state = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except _GONE:
        return False
    return state not in ("Z", "X")


def descendants(pid: int) -> list[int]:
    """The processes ``pid`` forked, and theirs, in the order ``/proc`` lists them.

    Each thread lists the children it forked (``/proc/PID/task/TID/children``), so
    every thread of the process is read.
    """
    found: list[int] = []
    try:
        tasks = list((PROC / str(pid) / "task").iterdir())
    except _GONE:
        return found
    for task in tasks:
        try:
            children = (task / "children").read_text().split()
        except _GONE:  # the thread ended meanwhile
            continue
        for child in map(int, children):
            found += [child, *descendants(child)]
    return found


def footprint(pid: int) -> Footprint | None:
    """``pid``'s memory, descriptors, threads and CPU time; None once it has ended."""
    folder = PROC / str(pid)
    try:
        status = dict(line.split(":", 1) for line in (folder / "status").read_text().splitlines())
        if status["State"].split()[0] in ("Z", "X"):  # ended, not yet reaped: no memory left
            return None
        return Footprint(
            pid=pid,
            rss_kib=_kib(status["VmRSS"]),
            hwm_kib=_kib(status["VmHWM"]),
            fds=len(os.listdir(folder / "fd")),
            threads=len(os.listdir(folder / "task")),
            cpu_seconds=cpu_seconds(pid),
        )
    except (*_GONE, KeyError):
        return None


def _kib(value: str) -> int:
    """``"  1620 kB"`` as 1620."""
    number, unit = value.split()
    assert unit == "kB", value
    return int(number)
