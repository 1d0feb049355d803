"""A real cardrules server in a subprocess on loopback, for tests (design section 7)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.procfs import PROC, descendants, is_running

CARDRULES = str(Path(sys.executable).parent / "cardrules")
TEST_KEY = (
    "q83vEjRWeJASNFZ4kBI0VniQEjRWeJASNFZ4kBI0Vng="  # fixed test key, never used in production
)


@dataclass
class ServerProcess:
    """A running ``cardrules serve``; ``logs`` collects its JSON log lines.

    ``metrics_port`` is filled in from the ``metrics`` log line (0 until then,
    and for good when metrics are off); ``http_port`` from the ``listening`` line.
    """

    process: subprocess.Popen[str]
    grpc_port: int
    logs: list[dict[str, object]] = field(default_factory=list)
    _reader: threading.Thread | None = None
    metrics_port: int = 0
    http_port: int = 0

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        """The HTTP/JSON gateway, e.g. ``http://127.0.0.1:8080`` (no trailing slash)."""
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM, wait, and return the exit status; a server still running after
        ``timeout`` fails the test with what each of its processes was doing."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"the server still ran {timeout} s after SIGTERM\n{self.hang_report()}"
            ) from None
        _REAPER_OF_THIS_PROCESS.forget(self.process.pid)
        if self._reader is not None:
            self._reader.join(timeout)
        return code

    def hang_report(self) -> str:
        """What the server and each process it forked were doing, then its whole log: each
        thread's kernel state, and the Python stack of each thread, which faulthandler
        (``PYTHONFAULTHANDLER``, ``server_environment``) writes as SIGABRT ends the
        process. Kills the group."""
        members = [self.process.pid, *descendants(self.process.pid)]
        report = [f"process {pid}:\n{thread_states(pid)}" for pid in members]
        # One at a time, the workers before the supervisor: each writes its stacks as it
        # ends, into the one log pipe, and stacks written at once came interleaved, a
        # line of one cut by another's (which may take a while on a loaded machine).
        deadline = time.monotonic() + 10
        for pid in reversed(members):
            with contextlib.suppress(OSError):  # no core file left behind
                resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGABRT)
            while is_running(pid) and time.monotonic() < deadline:
                time.sleep(0.02)
        kill_group(self.process)
        if self._reader is not None:
            self._reader.join(10)  # the stacks arrive through the log pipe
        report += (
            str(line["text"]) if line.get("event") == "raw" else json.dumps(line)
            for line in list(self.logs)
        )
        return "\n".join(report)

    def kill(self) -> None:
        """SIGKILL the server and its workers: clean-up after a failed test, never a test step.

        The server leads a process group of its own (``start_server``), so workers a
        dead supervisor left behind go too.
        """
        kill_group(self.process)

    def log_events(self, event: str) -> list[dict[str, object]]:
        return [line for line in list(self.logs) if line.get("event") == event]

    def wait_for_logs(
        self, event: str, count: int = 1, timeout: float = 30
    ) -> list[dict[str, object]]:
        """The ``event`` lines once there are at least ``count``; raises on timeout."""
        deadline = time.monotonic() + timeout
        while len(found := self.log_events(event)) < count:
            if time.monotonic() > deadline or (
                self.process.poll() is not None
                and self._reader is not None
                and not self._reader.is_alive()
            ):
                raise RuntimeError(f"expected {count} {event!r} log lines: {self.logs}")
            time.sleep(0.02)
        return found

    def request_lines(self, *request_ids: str, timeout: float = 10) -> list[dict[str, object]]:
        """The request log line of each id, once all have come (lines arrive on a thread)."""
        deadline = time.monotonic() + timeout
        while True:
            lines = {str(line["request_id"]): line for line in self.log_events("request")}
            if all(request_id in lines for request_id in request_ids):
                return [lines[request_id] for request_id in request_ids]
            if time.monotonic() > deadline:
                raise RuntimeError(f"no request line for some of {request_ids}")
            time.sleep(0.02)


def _ephemeral_ports() -> range:
    """The ports the kernel hands out for port 0 and outgoing connections."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    return range(low, high + 1)


_FIXED_PORTS = random.Random()


def loaded_at_start(folder: Path, code: str) -> str:
    """A ``PYTHONPATH`` on which a Python process runs ``code`` as it starts, before its
    own code (a ``sitecustomize`` in ``folder``): a test-only fault or setting for a
    server that the test starts."""
    (folder / "sitecustomize.py").write_text(code)
    return os.pathsep.join(filter(None, (str(folder), os.environ.get("PYTHONPATH"))))


def free_ports(count: int) -> list[int]:
    """``count`` different loopback ports that were free a moment ago (for options that
    need fixed ports). They are drawn outside the kernel's ephemeral range, which the
    many client connections and port-0 servers of a parallel test run keep using, so
    none of those can take a port between this choice and the server's bind. The
    probes stay bound until all are chosen, so no two are equal."""
    ephemeral = _ephemeral_ports()
    with contextlib.ExitStack() as probes:
        ports: list[int] = []
        while len(ports) < count:
            port = _FIXED_PORTS.randrange(10_000, 65_536)
            if port in ephemeral:
                continue
            probe = probes.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue  # taken: draw again
            ports.append(port)
        return ports


def free_port() -> int:
    """A loopback port that was free a moment ago (for an option that needs a fixed port)."""
    return free_ports(1)[0]


# Reads process-group ids, "+id" to watch and "-id" to forget, until the test process
# that wrote them is gone (end of input, however it went), then SIGKILLs what it watches.
_REAPER = """
import os, signal, sys
groups = set()
for line in sys.stdin:
    group = int(line)
    if group > 0:
        groups.add(group)
    else:
        groups.discard(-group)
for group in groups:
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass
"""


class _Reaper:
    """Kills the process groups this test process started, should it die first.

    Servers run in sessions of their own (``kill_group``), so nothing stops them
    when a test process is killed outright (SIGKILL, a CI time limit) and runs no
    clean-up: they would serve on. The reaper, in a session of its own too, reads
    their group ids on a pipe whose end is this process's death. A group is
    forgotten once it is gone, so a reused id (``pid_max`` can be 32,768) is never
    killed.
    """

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def _tell(self, line: str) -> None:
        with self._lock:
            if self._process is None:
                self._process = subprocess.Popen(
                    [sys.executable, "-c", _REAPER],
                    stdin=subprocess.PIPE,
                    text=True,
                    start_new_session=True,
                )
            assert self._process.stdin is not None
            self._process.stdin.write(line + "\n")
            self._process.stdin.flush()

    def watch(self, group: int) -> None:
        self._tell(f"+{group}")

    def forget(self, group: int) -> None:
        self._tell(f"-{group}")


_REAPER_OF_THIS_PROCESS = _Reaper()


def in_mount_namespace(script: str, *script_args: str) -> tuple[str, ...]:
    """A launcher that runs the shell ``script`` (``$1``... are ``script_args``; it ends
    by running the launched command) in a mount namespace of its own, so that it may
    mount a small filesystem for the launched command alone. Unprivileged, a user
    namespace maps the caller to root."""
    user = () if os.geteuid() == 0 else ("--map-root-user",)
    return ("unshare", "--mount", *user, "sh", "-c", script, "sh", *script_args)


def start_session(command: Sequence[str], **options: Any) -> subprocess.Popen[str]:
    """``subprocess.Popen(command, **options)`` in a session and process group of its own,
    which ``kill_group`` ends, or the reaper if this test process dies first."""
    process: subprocess.Popen[str] = subprocess.Popen(command, start_new_session=True, **options)
    _REAPER_OF_THIS_PROCESS.watch(process.pid)
    return process


def thread_states(pid: int, proc: Path = PROC) -> str:
    """One line per thread of ``pid``, the main thread first: its name, state, where it
    sleeps in the kernel, and its blocked and pending signals (hex masks of
    ``/proc/PID/task/TID/status``)."""
    lines = []
    # Then in thread id order, not the names': thread 1003 of process 991 came first. The
    # main thread's id is the pid, yet not always the least: past the pid wrap, the threads
    # of process 32767 had ids in the hundreds.
    tasks = (proc / str(pid) / "task").glob("*")
    for task in sorted(tasks, key=lambda task: (int(task.name) != pid, int(task.name))):
        # Gone since the listing, or a field this kernel lacks: the report must not fail.
        with contextlib.suppress(OSError, ValueError, KeyError):
            status = dict(
                line.split(":\t", 1) for line in (task / "status").read_text().splitlines()
            )
            wchan = (task / "wchan").read_text()
            lines.append(
                f"  {task.name} {status['Name']} {status['State']} in {wchan or '-'}, "
                f"blocked {status['SigBlk']}, pending {status['SigPnd']}/{status['ShdPnd']}"
            )
    return "\n".join(lines)


def kill_group(process: subprocess.Popen[str]) -> None:
    """SIGKILL ``process``, started by ``start_session``, and all it forked."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    _REAPER_OF_THIS_PROCESS.forget(process.pid)


def server_environment(
    env: Mapping[str, str] | None = None, keys: str | None = TEST_KEY
) -> dict[str, str]:
    """This process's environment without ``CARDRULES_*``, plus the keys, JSON logs and ``env``
    (``keys`` ``None``: no ``CARDRULES_STATE_KEYS`` at all)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CARDRULES_")}
    if keys is not None:
        environ["CARDRULES_STATE_KEYS"] = keys
    environ["CARDRULES_LOG_FORMAT"] = "json"
    # A hung server's Python stacks, on SIGABRT (``ServerProcess.hang_report``).
    environ["PYTHONFAULTHANDLER"] = "1"
    # A free HTTP port unless the test picks one: parallel servers must not all want 8080.
    environ["CARDRULES_HTTP_PORT"] = "0"
    # Tests stop servers often; the ones about draining set their own delay.
    environ["CARDRULES_DRAIN_DELAY_SECONDS"] = "0"
    environ.update(env or {})
    return environ


def start_server(
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    keys: str | None = TEST_KEY,
    timeout: float = 30,
    *,
    loopback_flags: bool = True,
    launcher: Sequence[str] = (),
) -> ServerProcess:
    """Start ``cardrules serve`` on a free port and wait for its ``listening`` line.

    With ``loopback_flags=False`` no ``--host``/``--grpc-port``/``--metrics-port``
    flags are added: ``env`` (or ``args``) must say where to listen. ``launcher``
    is a command that ends by running (exec) its arguments, the server's command.
    """
    environ = server_environment(env, keys)
    command = [
        *launcher,
        CARDRULES,
        "serve",
        *(("--host", "127.0.0.1") if loopback_flags else ()),
        *args,
    ]
    if loopback_flags:
        if "--grpc-port" not in args:
            command += ["--grpc-port", "0"]
        if "--metrics-port" not in args:
            command += ["--metrics-port", "0"]
    if (
        "--workers" in args
        and "--http-port" not in args
        and "CARDRULES_HTTP_PORT" not in (env or {})
    ):
        # Workers share one fixed port, which must be none of those ``args`` chose.
        chosen = {value for flag, value in itertools.pairwise(args) if flag.endswith("-port")}
        free = map(str, free_ports(len(chosen) + 1))
        command += ["--http-port", next(port for port in free if port not in chosen)]
    process = start_session(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environ
    )
    server = ServerProcess(process, 0)
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
                line = {"event": "raw", "text": raw.rstrip()}
            if not isinstance(line, dict):
                line = {"event": "raw", "text": raw.rstrip()}
            if line.get("event") == "metrics" and not server.metrics_port:
                server.metrics_port = int(str(line["address"]).rsplit(":", 1)[1])
            server.logs.append(line)
            if line.get("event") == "listening" and not ready.is_set():
                server.grpc_port = int(str(line["grpc_port"]))
                server.http_port = int(str(line.get("http_port", 0)))
                ready.set()
        # At the end of the log, once every process of the server has gone: left open,
        # the pipe was an "unclosed file" ResourceWarning under -X dev.
        process.stdout.close()

    server._reader = threading.Thread(target=read, daemon=True)
    server._reader.start()
    if not ready.wait(timeout):
        kill_group(process)
        raise RuntimeError(f"server did not start: {server.logs}")
    return server


@contextmanager
def running(
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    keys: str | None = TEST_KEY,
    timeout: float = 30,
    *,
    loopback_flags: bool = True,
    launcher: Sequence[str] = (),
    failures_expected: bool = False,
) -> Iterator[ServerProcess]:
    """A server for one test; it must drain and exit 0, and is killed if the test failed.

    Its log must show no failure (``failure_lines``) unless ``failures_expected``: a test
    that provokes one on purpose checks it itself. ``loopback_flags`` and ``launcher``
    as for ``start_server``.
    """
    server = start_server(
        args, env, keys, timeout, loopback_flags=loopback_flags, launcher=launcher
    )
    try:
        yield server
    except BaseException:
        server.kill()
        raise
    assert server.terminate() == 0
    if not failures_expected:
        assert failure_lines(server) == []


def serve_and_fail(
    *args: str, env: Mapping[str, str] | None = None, keys: str | None = TEST_KEY
) -> subprocess.CompletedProcess[str]:
    """Run ``cardrules serve`` on loopback expecting it to refuse to start and exit.

    ``args`` come after ``--host 127.0.0.1 --grpc-port <free> --metrics-port 0`` and so
    win over them; ``env`` and ``keys`` as for ``server_environment``. A server that
    does not exit within 30 s is killed with the workers it forked, and the test fails.
    """
    command = [
        CARDRULES,
        "serve",
        "--host",
        "127.0.0.1",
        "--grpc-port",
        str(free_port()),
        "--metrics-port",
        "0",
        *args,
    ]
    with start_session(
        command,
        env=server_environment(env, keys),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            kill_group(process)
            raise
    _REAPER_OF_THIS_PROCESS.forget(process.pid)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def events(output: str) -> list[dict[str, object]]:
    """The JSON log lines of ``output``; any other line (a traceback) fails the test."""
    return [json.loads(line) for line in output.splitlines()]


def cannot_listen_line(
    done: subprocess.CompletedProcess[str], setting: str | None = None
) -> dict[str, object]:
    """The one ``cannot listen`` line of a server that could not bind and exited 1, which
    names the setting that mends it: ``setting``, by default the listener's port."""
    assert done.returncode == 1
    [failure] = [line for line in events(done.stdout) if line["event"] == "cannot listen"]
    listener = str(failure["listener"])
    port = f"--{listener}-port or CARDRULES_{listener.upper()}_PORT"
    assert failure["setting"] == (setting or port)
    return failure


@contextmanager
def port_taken(address: str = "127.0.0.1") -> Iterator[int]:
    """A port that something else listens on at ``address``; at an IPv6 address (``::``
    included) for IPv6 alone, so that the port stays free on IPv4."""
    ipv6 = ":" in address
    with socket.socket(socket.AF_INET6 if ipv6 else socket.AF_INET) as holder:
        if ipv6:
            holder.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        holder.bind((address, 0))
        holder.listen()
        yield holder.getsockname()[1]


# Events that only a bug logs: an exception a handler let through, a process that crashed.
FAILURE_EVENTS = frozenset({"unhandled error", "worker crashed", "server crashed"})


def failure_lines(server: ServerProcess) -> list[dict[str, object]]:
    """The log lines of ``server`` that show a bug: anything at level error or critical,
    an unhandled error or crashed worker, a call answered ``Internal``, or a raw line.

    The server logs JSON only (``server_environment``), so a line that is no JSON object
    was written past the logger: a traceback, or an error of gRPC's core.
    """
    return [
        line
        for line in list(server.logs)
        if line.get("level") in ("error", "critical")
        or line.get("event") in FAILURE_EVENTS | {"raw"}
        or (line.get("event") == "request" and line.get("code") == "Internal")
    ]


def stop_and_check(server: ServerProcess) -> None:
    """Stop a shared server at the end of its fixture: it must exit 0, and its whole log
    (complete once ``terminate`` has joined the log reader) must show no failure, whatever
    the tests that used it did."""
    assert server.terminate() == 0
    assert failure_lines(server) == []
