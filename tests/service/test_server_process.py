"""The test servers' own guarantee: none outlives the test process that started it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import procfs
from bench.procfs import descendants, is_running
from tests.service.server_process import free_port, start_server, thread_states

ROOT = Path(__file__).resolve().parents[2]

# A test process that starts a server with two workers and is killed outright, as a
# CI time limit kills one: no clean-up of its own runs.
KILLED_TEST_PROCESS = """
import os, signal, sys
from tests.service.server_process import start_server
server = start_server(("--workers", "2", "--grpc-port", sys.argv[1]))
pids = [int(line["pid"]) for line in server.wait_for_logs("listening", 2)]
print(server.process.pid, *pids, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_the_servers_of_a_test_process_killed_outright_are_killed_after_it():
    """Servers run in sessions of their own, so a dying test process takes none of them
    along; its reaper kills them, the supervisor and every worker."""
    done = subprocess.run(
        [sys.executable, "-c", KILLED_TEST_PROCESS, str(free_port())],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == -9, done.stderr
    pids = [int(pid) for pid in done.stdout.split()]
    assert len(pids) == 3
    deadline = time.monotonic() + 30
    while any(is_running(pid) for pid in pids):
        assert time.monotonic() < deadline, [pid for pid in pids if is_running(pid)]
        time.sleep(0.05)


def test_a_server_that_does_not_stop_in_time_fails_the_test_with_what_it_was_doing():
    """``terminate`` names each process of a server that outlives its timeout with the
    kernel state of its threads and their Python stacks, and leaves none running: a hang
    in CI must be understood from its report alone."""
    server = start_server(
        ("--workers", "2", "--grpc-port", str(free_port()), "--drain-delay-seconds", "30")
    )
    pids = [int(str(line["pid"])) for line in server.wait_for_logs("listening", 2)]
    with pytest.raises(AssertionError) as failure:
        server.terminate(timeout=1)
    report = str(failure.value)
    assert report.startswith("the server still ran 1 s after SIGTERM\n")
    for pid in (server.process.pid, *pids):
        assert f"process {pid}:\n  {pid} cardrules " in report
        assert not is_running(pid)
    # faulthandler's stacks: the supervisor waits for its workers, each worker drains.
    assert re.search(r'File ".*service/supervisor\.py", line \d+ in _supervise', report)
    assert report.count("in _run_worker") == 2
    assert report.count('"event": "draining"') == 2


@pytest.mark.parametrize(
    ("pid", "tids", "listed"),
    [
        (991, (1003, 991, 995), ["991", "995", "1003"]),
        (32767, (301, 32767, 300), ["32767", "300", "301"]),  # past the pid wrap
    ],
)
def test_a_hang_report_lists_each_process_from_its_main_thread_in_thread_id_order(
    tmp_path: Path, pid: int, tids: tuple[int, ...], listed: list[str]
) -> None:
    """Thread ids are ordered as numbers: once a worker's threads passed 999, thread 1003
    of process 991 was listed first, and the report seemed to lack the process (a CI run).
    The main thread comes first even when its id is not the least: process 32767's threads
    had wrapped to ids in the hundreds, and the report again seemed to lack it (a CI run).
    A folder shaped as ``/proc`` stands in, since no test can choose its thread ids."""
    for tid in tids:
        task = tmp_path / str(pid) / "task" / str(tid)
        task.mkdir(parents=True)
        status = {"Name": "cardrules", "State": "S (sleeping)", "SigBlk": "0", "SigPnd": "0"}
        status["ShdPnd"] = "0"
        (task / "status").write_text("".join(f"{k}:\t{v}\n" for k, v in status.items()))
        (task / "wchan").write_text("do_epoll_wait")
    lines = thread_states(pid, proc=tmp_path).splitlines()
    assert [line.split()[0] for line in lines] == listed
    assert lines[0] == f"  {pid} cardrules S (sleeping) in do_epoll_wait, blocked 0, pending 0/0"


def test_a_process_reaped_between_opening_and_reading_its_files_is_not_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reaped between the open and the read, its /proc files raise ESRCH, not
    FileNotFoundError: a hang report failed that way in CI. A folder shaped as ``/proc``
    links to files of a real process opened while it ran, read after it was reaped."""
    child = subprocess.Popen(["sleep", "60"])
    opened = [os.open(f"/proc/{child.pid}/{name}", os.O_RDONLY) for name in ("stat", "task")]
    child.kill()
    child.wait()
    try:
        folder = tmp_path / str(child.pid)
        folder.mkdir()
        (folder / "stat").symlink_to(f"/proc/self/fd/{opened[0]}")
        with pytest.raises(ProcessLookupError):
            (folder / "stat").read_text()
        (folder / "task").symlink_to(f"/proc/self/fd/{opened[1]}")
        monkeypatch.setattr(procfs, "PROC", tmp_path)
        assert not is_running(child.pid)
        assert descendants(child.pid) == []
    finally:
        for descriptor in opened:
            os.close(descriptor)
