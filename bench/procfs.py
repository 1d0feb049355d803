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
    fields = stat_fields(stat)
    return int(fields[11]) + int(fields[12])


def stat_fields(stat: str) -> list[str]:
    """The fields of a ``/proc/<pid>/stat`` line from the third (the state) on."""
    # The command name, in parentheses, may hold spaces and ")": the fields follow its last ")".
    return stat.rsplit(")", 1)[1].split()


# What reading a process's files raises once it is gone: no file, or, reaped between the
# open and the read, ESRCH (a hang report in CI met that; ``footprint`` already knew).
_GONE = (FileNotFoundError, ProcessLookupError)


def is_running(pid: int) -> bool:
    """Whether ``pid`` runs: it exists and is no zombie (ended, not yet reaped)."""
    try:
        state = stat_fields((PROC / str(pid) / "stat").read_text())[0]
    except _GONE:
        return False
    return state not in ("Z", "X")


def descendants(pid: int) -> list[int]:
    """The processes ``pid`` forked, and theirs: its children in pid order, then theirs.

    Found by the parent pid in every ``/proc/<pid>/stat`` (field 4), not through
    ``/proc/PID/task/TID/children``, which the kernel documents as reliable only for
    stopped or frozen children, and which a kernel built without ``CONFIG_PROC_CHILDREN``
    lacks. A process forked by any thread names the process as its parent.
    """
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except _GONE:  # ended since the listing
            continue
        children.setdefault(parent_pid(stat), []).append(int(entry.name))
    found: list[int] = []
    level = [pid]
    while level:
        level = [child for parent in level for child in sorted(children.get(parent, []))]
        found += level
    return found


def parent_pid(stat: str) -> int:
    """The parent's pid in a ``/proc/<pid>/stat`` line (field 4)."""
    return int(stat_fields(stat)[1])


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
