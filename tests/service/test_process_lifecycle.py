"""How a ``cardrules serve`` process starts and ends (design section 6, docs/operations.md):
stop signals during start-up, listeners that cannot bind, the workers' supervisor
(signals, a dead worker, a killed supervisor, a child that is no worker, its
metrics folder) and IPv6 hosts. Real processes on loopback.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import cast

import grpc
import pytest
import structlog.testing
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from grpc_health.v1 import health_pb2

from bench.procfs import cpu_seconds, descendants, is_running
from service.codec import config_from_proto
from service.config import host_port
from service.listen import ipv6_available, resolved_addresses
from service.metrics import MAX_NAMED_VARIANTS, variant_label
from service.open_files import AcceptErrorsOncePerWindow
from service.serve_command import (
    TEMPORARY_PREFIX,
    UNLOCKED_FOLDER_SECONDS,
    remove_abandoned_folders,
)
from tests.service.grpc_helpers import connect, health
from tests.service.metrics_helpers import handled, metric_samples
from tests.service.server_process import (
    CARDRULES,
    ServerProcess,
    cannot_listen_line,
    events,
    failure_lines,
    free_port,
    free_ports,
    in_mount_namespace,
    kill_group,
    port_taken,
    running,
    serve_and_fail,
    server_environment,
    start_server,
    start_session,
)

WORKERS = ("--workers", "2")
ROOT = Path(__file__).resolve().parents[2]


def workers() -> tuple[str, ...]:
    """Two workers on a fixed gRPC port, as ``--workers`` needs."""
    return (*WORKERS, "--grpc-port", str(free_port()))


@contextmanager
def launched(
    args: Sequence[str],
    env: dict[str, str] | None = None,
    program: Sequence[str] = (CARDRULES,),
    cwd: Path | None = None,
) -> Iterator[subprocess.Popen[str]]:
    """``cardrules serve`` (or ``program`` taking its arguments) on loopback with free ports
    and no state keys (so that its first log line, the ephemeral-key warning, comes before
    anything listens); it and its workers are killed afterwards if the test left them
    running."""
    environ = server_environment(env, keys=None)
    http_port, grpc_port, metrics_port = free_ports(3)
    command = [*program, "serve", "--host", "127.0.0.1", "--http-port", str(http_port)]
    if "--grpc-port" not in args:
        command += ["--grpc-port", str(grpc_port)]
    if "--metrics-port" not in args:
        command += ["--metrics-port", str(metrics_port)]
    process = start_session(
        [*command, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environ,
        cwd=cwd,
    )
    try:
        yield process
    finally:
        kill_group(process)


def nothing_listens_on(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


# Runs the console script's main with a hook that reports, when ``service.cli`` is first
# imported, whether SIGTERM has a handler yet and which of the heavy modules are loaded.
SCRIPT_PROBE = """
import importlib.abc, json, signal, sys
class Probe(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "service.cli":
            heavy = ("asyncio", "grpc", "aiohttp", "cryptography", "structlog", "engine")
            print(json.dumps({
                "sigterm_handled": signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL,
                "loaded": [module for module in heavy if module in sys.modules],
            }))
            raise SystemExit(0)
sys.meta_path.insert(0, Probe())
sys.argv[1:] = [sys.argv[1]]
from service.entry import main
main()
"""


@pytest.mark.parametrize(("command", "handled"), [("serve", True), ("keygen", False)])
def test_the_console_script_takes_sigterm_before_it_imports_the_server(command, handled):
    """The server's imports take a few tenths of a second, and a SIGTERM without a handler
    would kill the process (status 143), or as a container's PID 1 be dropped, leaving it
    to serve on until killed. Other commands keep the default action."""
    probe = subprocess.run(
        [sys.executable, "-c", SCRIPT_PROBE, command],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(probe.stdout) == {"sigterm_handled": handled, "loaded": []}


@pytest.mark.parametrize("args", [(), WORKERS], ids=["one_process", "workers"])
def test_sigterm_during_start_up_still_drains_and_exits_0(args):
    """Sent as soon as the first log line appears, before any server listens: with the
    default action the process would die by SIGTERM (status 143)."""
    with launched(args) as process:
        assert process.stdout is not None
        first = json.loads(process.stdout.readline())
        assert first["event"].startswith("no state keys configured")
        process.send_signal(signal.SIGTERM)
        output = process.stdout.read()
        assert process.wait(60) == 0
    lines = events(output)
    workers = 2 if args else 1
    assert [line["event"] for line in lines].count("stopped") == workers
    draining = [line for line in lines if line["event"] == "draining"]
    assert [line["signal"] for line in draining] == ["SIGTERM"] * workers, draining
    assert not [line for line in lines if line["level"] == "error"]


# The console script's main, sent the stop signals ``SEND_SIGNALS`` names by itself while it
# imports the server (at the first import of ``service.cli``): the window before any
# server code can take a signal.
SCRIPT_SIGNALLED_WHILE_IMPORTING = """
import importlib.abc, os, signal, sys
class SendStopSignals(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "service.cli":
            sys.meta_path.remove(self)
            for name in os.environ["SEND_SIGNALS"].split():
                os.kill(os.getpid(), signal.Signals[name])
        return None
sys.meta_path.insert(0, SendStopSignals())
from service.entry import main
raise SystemExit(main())
"""


@pytest.mark.parametrize("sent", ["SIGTERM", "SIGTERM SIGHUP"], ids=["sigterm", "then_sighup"])
def test_sigterm_while_the_server_is_imported_is_kept_and_drains_once_it_serves(sent):
    """docs/operations.md, "Termination": a SIGTERM that comes while the server is still
    starting is kept, and the server stops as soon as it serves. Here it comes in the
    few tenths of a second the console script spends importing the server, after it
    began recording stop signals and before anything of the server ran. Only the first
    stop signal counts, so a SIGHUP after it leaves the drain a SIGTERM's."""
    script = (sys.executable, "-c", SCRIPT_SIGNALLED_WHILE_IMPORTING)
    with launched(("--drain-delay-seconds", "0.2"), {"SEND_SIGNALS": sent}, script) as process:
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    lines = events(output)
    names = [line["event"] for line in lines]
    assert names.index("listening") < names.index("draining") < names.index("stopped")
    draining = [line for line in lines if line["event"] == "draining"]
    assert [(line["signal"], line["drain_delay_seconds"]) for line in draining] == [
        ("SIGTERM", 0.2)
    ]


def test_make_serve_prints_where_it_listens_serves_and_stops_with_status_0():
    """The README's first command. Its ports come from ``SERVE_ARGS`` here, since tests
    running side by side cannot all take the embedded defaults (test_config_docs.py
    checks those)."""
    grpc_port, http_port, metrics_port = free_ports(3)
    flags = f"--host 127.0.0.1 --grpc-port {grpc_port} --http-port {http_port}"
    process = start_session(
        ["make", "-s", "serve", f"SERVE_ARGS={flags} --metrics-port {metrics_port}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=server_environment(keys=None),
    )
    try:
        assert process.stdout is not None
        lines = [json.loads(process.stdout.readline()) for _ in range(3)]
        assert [line["event"] for line in lines][1:] == ["metrics", "listening"], lines
        assert lines[1]["address"] == f"127.0.0.1:{metrics_port}"
        listening = lines[2]
        assert (listening["grpc"], listening["http"]) == (
            f"127.0.0.1:{grpc_port}",
            f"127.0.0.1:{http_port}",
        )
        with connect(f"127.0.0.1:{grpc_port}") as stub:
            new_game = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=10)
        assert new_game.view.game_id
        os.kill(int(listening["pid"]), signal.SIGTERM)  # make passes on the server's status
        output = process.stdout.read()
        assert process.wait(60) == 0, output
    finally:
        kill_group(process)
    assert [line["event"] for line in events(output)][-1] == "stopped"


@pytest.mark.parametrize("args", [(), WORKERS], ids=["one_process", "workers"])
def test_a_taken_metrics_port_exits_1_with_a_cannot_listen_line_and_leaves_nothing_running(
    args,
):
    grpc_port = free_port()
    with (
        port_taken() as metrics_port,
        launched(
            [*args, "--grpc-port", str(grpc_port), "--metrics-port", str(metrics_port)]
        ) as process,
    ):
        output, _ = process.communicate(timeout=60)
        assert process.returncode == 1
        lines = events(output)
        failures = [line for line in lines if line["event"] == "cannot listen"]
        assert [(line["listener"], line["address"]) for line in failures] == [
            ("metrics", f"127.0.0.1:{metrics_port}")
        ]
        # Checked before anything starts: no worker was forked.
        assert nothing_listens_on(grpc_port)
        assert not [line for line in lines if line["event"] in ("listening", "stopped")]


def test_a_grpc_port_in_use_exits_1_with_one_cannot_listen_line_naming_the_cause():
    """grpc's own refusal said only "Failed to bind" and wrote a raw line to stderr."""
    with port_taken() as port:
        done = serve_and_fail("--grpc-port", str(port))
    failure = cannot_listen_line(done)
    assert (failure["listener"], failure["address"]) == ("grpc", f"127.0.0.1:{port}")
    assert "in use" in str(failure["error"])
    assert done.stderr == ""


def test_a_host_that_is_no_address_here_is_named_with_its_cause_on_any_port():
    """With port 0 (any free port) nothing was checked before grpc bound, whose refusal
    says only "Failed to bind" and whose reason went to stderr as a raw line of its own
    (a CLI review's find). 192.0.2.1 is TEST-NET-1: no machine's address."""
    done = serve_and_fail("--host", "192.0.2.1", "--grpc-port", "0", "--http-port", "0")
    failure = cannot_listen_line(done, setting="--host or CARDRULES_HOST")
    assert (failure["listener"], failure["address"]) == ("grpc", "192.0.2.1:0")
    assert "Cannot assign requested address" in str(failure["error"])
    assert done.stderr == ""


def test_a_host_name_that_does_not_resolve_is_blamed_on_the_host_setting():
    """Such a host's ``cannot listen`` line named ``--grpc-port`` as the setting to change
    (a configuration review). ``.invalid`` never resolves (RFC 6761)."""
    done = serve_and_fail("--host", "nosuchhost.invalid", "--grpc-port", "0", "--http-port", "0")
    failure = cannot_listen_line(done, setting="--host or CARDRULES_HOST")
    assert failure["address"] == "nosuchhost.invalid:0"


@contextmanager
def serving_a_game_with_metrics_in(folder: Path) -> Iterator[ServerProcess]:
    """A server with workers, its metrics in ``folder``, that has started one game."""
    env = {"PROMETHEUS_MULTIPROC_DIR": str(folder)}
    with running((*workers(), "--metrics-port", str(free_port())), env) as server:
        server.wait_for_logs("listening", 2)
        server.wait_for_logs("metrics")
        with connect(server.target) as stub:
            stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=30)
        yield server


@pytest.mark.parametrize("taken", ["grpc", "http"])
def test_workers_do_not_share_their_ports_with_a_second_server(taken, tmp_path):
    """Workers bind with SO_REUSEPORT, which a second server of the same user could share:
    started by mistake on the same ports, it would take half the connections with other
    keys. It must stop with ``cannot listen`` instead, and the first keep serving, its
    metrics too. (Given the first's metrics folder as well, it is refused for that
    first: test_a_second_server_given_a_metrics_folder_in_use_exits_1_and_deletes_nothing.)"""
    folder = tmp_path / "metrics"
    with serving_a_game_with_metrics_in(folder) as first:
        values = sorted(folder.glob("*.db"))
        ports = {"grpc": first.grpc_port, "http": first.http_port}
        other_grpc, other_http = free_ports(2)
        second = serve_and_fail(
            *WORKERS,
            "--grpc-port",
            str(ports["grpc"] if taken == "grpc" else other_grpc),
            "--http-port",
            str(ports["http"] if taken == "http" else other_http),
            env={"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "second")},
        )
        failure = cannot_listen_line(second)
        assert failure["address"] == f"127.0.0.1:{ports[taken]}"
        assert "listening" not in second.stdout
        # The supervisor's own first and last lines frame a start refused at the ports
        # too (docs/operations.md "Workers"): under a restarting unit, what it retries.
        lines = events(second.stdout)
        assert lines[0]["event"] == "starting workers", lines
        assert lines[-1]["event"] == "supervisor stopped", lines
        assert lines[-1]["exit_status"] == 1 and lines[-1]["level"] == "error"
        assert lines[0]["pid"] == lines[-1]["pid"]
        assert nothing_listens_on(other_grpc) and nothing_listens_on(other_http)
        with grpc.insecure_channel(first.target) as channel:
            reply = health(channel).Check(
                health_pb2.HealthCheckRequest(service="readiness"), timeout=10
            )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        assert values and sorted(folder.glob("*.db")) == values
        found = metric_samples(first.metrics_url)
        assert (
            sum(v for (name, _), v in found.items() if name == "cardrules_games_started_total") == 1
        )


@contextmanager
def port_claimed(port: int) -> Iterator[socket.socket]:
    """The claim a server with workers holds on ``port`` (service/ports.py ``claim``),
    held by this process: a Linux abstract Unix socket named after the port."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as claim:
        claim.bind(f"\0cardrules-port-{port}")
        yield claim


def claim_refused(port: int) -> bool:
    """Whether another process holds the claim on ``port``."""
    try:
        with port_claimed(port):
            return False
    except OSError as error:
        assert error.errno == errno.EADDRINUSE, error
        return True


@pytest.mark.parametrize("claimed", ["grpc", "http"])
def test_workers_stop_at_start_on_a_port_another_server_with_workers_claimed(claimed):
    """A port nothing listens on yet, claimed by another server with workers: it is
    starting, between its check and its workers' binds. The check alone, a test bind
    released before the workers bind with SO_REUSEPORT, let two servers started at the
    same moment both through, to share the ports with different keys: about half the
    calls failed TOKEN_UNKNOWN_KEY."""
    grpc_port, http_port = free_ports(2)
    ports = {"grpc": grpc_port, "http": http_port}
    with port_claimed(ports[claimed]):
        done = serve_and_fail(
            *WORKERS, "--grpc-port", str(grpc_port), "--http-port", str(http_port)
        )
    failure = cannot_listen_line(done)
    assert (failure["listener"], failure["address"]) == (claimed, f"127.0.0.1:{ports[claimed]}")
    assert str(failure["error"]).startswith(
        f"another cardrules server with workers is starting or serving on port {ports[claimed]}"
    )
    assert "listening" not in done.stdout and done.stderr == ""
    assert nothing_listens_on(grpc_port) and nothing_listens_on(http_port)
    # The claim of the port checked first is given back: nothing is left held.
    assert not claim_refused(grpc_port) and not claim_refused(http_port)


def test_of_two_servers_with_workers_started_at_once_on_the_same_ports_one_serves():
    """Started side by side (an ephemeral key each), both passed the check before either's
    workers bound, and both served, sharing the ports."""
    grpc_port, http_port = free_ports(2)
    args = (*WORKERS, "--grpc-port", str(grpc_port), "--http-port", str(http_port))
    with launched(args) as first, launched(args) as second:
        deadline = time.monotonic() + 30
        while first.poll() is None and second.poll() is None:
            assert time.monotonic() < deadline, "both servers run, sharing the ports"
            time.sleep(0.05)
        [refused] = [process for process in (first, second) if process.poll() is not None]
        [serving] = [process for process in (first, second) if process is not refused]
        output, _ = refused.communicate(timeout=30)
        failure = cannot_listen_line(subprocess.CompletedProcess((), refused.returncode, output))
        assert (failure["listener"], failure["address"]) == ("grpc", f"127.0.0.1:{grpc_port}")
        assert "listening" not in output
        assert serving.stdout is not None
        listening = 0
        while listening < 2:
            line = serving.stdout.readline()
            assert line, "the other server exited too"
            listening += json.loads(line)["event"] == "listening"
        assert claim_refused(grpc_port) and claim_refused(http_port)
        serving.send_signal(signal.SIGTERM)
        output, _ = serving.communicate(timeout=60)
        assert serving.returncode == 0, output
    assert not claim_refused(grpc_port) and not claim_refused(http_port)


def test_the_claim_on_the_ports_goes_with_the_supervisor_not_with_its_workers():
    """The supervisor holds the claim until it begins to stop, and the kernel gives it
    back however the supervisor dies. The workers close their copies as they are forked: a
    worker that outlived a killed supervisor, draining, must not keep a restarted server
    from its ports once it stops listening."""
    server = start_server((*workers(), "--drain-delay-seconds", "600"))
    try:
        pids = {int(str(line["pid"])) for line in server.wait_for_logs("listening", 2)}
        ports = (server.grpc_port, server.http_port)
        assert all(claim_refused(port) for port in ports)
        server.process.kill()
        server.process.wait()
        server.wait_for_logs("supervisor exited", 2)
        assert all(is_running(pid) for pid in pids)  # draining for 600 s
        assert not any(claim_refused(port) for port in ports)
    finally:
        server.kill()


def test_the_claim_on_the_ports_ends_as_the_server_begins_to_stop():
    """Held through the drain, the claim kept a restarted server off ports that no worker
    listened on any more, for up to the grace period (a review); while they still listen,
    the test bind keeps it off."""
    server = start_server((*workers(), "--drain-delay-seconds", "600"))
    try:
        server.wait_for_logs("listening", 2)
        ports = (server.grpc_port, server.http_port)
        assert all(claim_refused(port) for port in ports)
        server.process.send_signal(signal.SIGTERM)
        server.wait_for_logs("draining", 2)
        deadline = time.monotonic() + 30
        while any(claim_refused(port) for port in ports):
            assert time.monotonic() < deadline, "the claim outlived the first stop signal"
            time.sleep(0.05)
        second = serve_and_fail(
            *WORKERS, "--grpc-port", str(ports[0]), "--http-port", str(ports[1])
        )
        assert "Address already in use" in str(cannot_listen_line(second)["error"])
    finally:
        server.kill()


def test_a_server_restarted_at_once_on_the_same_ports_listens_again():
    """service/ports.py ``taken``: a port whose last connections linger in TIME_WAIT is
    free, as grpc and aiohttp bind it; an orchestrator restarts a stopped server on its
    ports at once. The server's own stop closes the HTTP connection a client still holds
    open, which leaves it in TIME_WAIT on the server's port."""
    grpc_port, http_port = free_ports(2)
    ports = ("--grpc-port", str(grpc_port), "--http-port", str(http_port))
    with connect(f"127.0.0.1:{grpc_port}") as stub, running(ports) as first:
        stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=30)
        with socket.create_connection(("127.0.0.1", http_port), timeout=10) as idle:
            idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert idle.recv(12) == b"HTTP/1.1 200"
            assert first.terminate() == 0
            while idle.recv(4096):  # read to the server's close: then ours is no reset
                pass
    with running(ports) as second:
        assert (second.grpc_port, second.http_port) == (grpc_port, http_port)


def test_a_single_process_server_as_pid_1_leaves_no_zombie_of_what_an_exec_left():
    """docs/operations.md, "The image": one worker runs as the container's PID 1 without
    an init process. A process that ``kubectl exec`` leaves running is re-parented to it
    when its shell exits, and once it ends must not stay a zombie (each holds a pid
    against the pod's limit): here the server is PID 1 of a PID namespace of its own."""
    user = () if os.geteuid() == 0 else ("--user", "--map-root-user")
    server = start_server(launcher=("unshare", *user, "--pid", "--fork"))
    try:
        (pid,) = descendants(server.process.pid)  # unshare's child: PID 1 inside
        enter = ("nsenter", "--target", str(pid), *user[:1], "--pid", "--preserve-credentials")
        subprocess.run((*enter, "sh", "-c", "sleep 2 & exit 0"), check=True, timeout=30)
        orphans = descendants(pid)  # its shell has exited: the sleep is the server's now
        assert orphans, "the sleep was not re-parented to the server"
        deadline = time.monotonic() + 30
        while descendants(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [(orphan, is_running(orphan)) for orphan in descendants(pid)]
        assert not left, f"children (pid, running) left to the server: {left}"
        os.kill(pid, signal.SIGTERM)  # unshare blocks SIGTERM and forwards nothing
        assert server.process.wait(30) == 0
    except BaseException:
        server.kill()
        raise


def test_a_single_process_server_shares_its_ports_with_no_other_socket():
    """Design section 6: only workers bind with SO_REUSEPORT (the kernel spreads
    connections among them). A single process that did so too would share its ports with
    any socket of the same user binding that way, which would take part of its
    connections."""
    with running() as server:
        server.wait_for_logs("listening")
        for port in (server.grpc_port, server.http_port):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
                other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                with pytest.raises(OSError) as refused:
                    other.bind(("127.0.0.1", port))
                assert refused.value.errno == errno.EADDRINUSE, port


@pytest.mark.parametrize(
    "signals",
    [(signal.SIGINT,), (signal.SIGTERM, signal.SIGINT), (signal.SIGHUP, signal.SIGINT)],
    ids=["sigint", "sigint_during_the_drain_delay", "sigint_during_a_sighup_drain"],
)
def test_the_supervisor_forwards_sigint_so_workers_skip_the_drain_delay(signals):
    with running((*workers(), "--drain-delay-seconds", "600"), timeout=30) as server:
        server.wait_for_logs("listening", 2)
        for signum in signals:
            server.process.send_signal(signum)
            server.wait_for_logs("draining", 2)
        assert server.process.wait(60) == 0  # well before the delay would have ended
    draining = server.log_events("draining")
    assert {line["signal"] for line in draining} == {signals[0].name}
    assert {line["drain_delay_seconds"] for line in draining} == {
        0 if signals[0] == signal.SIGINT else 600
    }
    assert len(server.log_events("stopped")) == 2


# Started as `nohup cardrules serve`, and as `cardrules serve &` in a shell script.
IGNORING = {
    signal.SIGHUP: ("nohup",),
    signal.SIGINT: ("sh", "-c", 'trap "" INT && exec "$@"', "sh"),
}


def assert_each_process_drained_on_sigterm(server: ServerProcess, processes: int) -> None:
    """One ``draining`` line per process, each for SIGTERM with the 0.2 s delay asked."""
    draining = server.log_events("draining")
    assert len(draining) == processes
    assert {(line["signal"], line["drain_delay_seconds"]) for line in draining} == {
        ("SIGTERM", 0.2)
    }


@pytest.mark.parametrize("ignored", list(IGNORING), ids=["sighup_under_nohup", "sigint"])
@pytest.mark.parametrize("processes", [1, 2], ids=["one_process", "workers"])
def test_a_terminal_signal_the_server_was_started_ignoring_stays_ignored(ignored, processes):
    """The terminal closing (SIGHUP) or its Ctrl-C (SIGINT) reaches the whole process
    group; a server started with that signal ignored keeps serving, as nohup or the
    shell asked, and SIGTERM still drains it. Had the first signal counted, it would
    name the drain: of two pending at once the lower number (SIGHUP, SIGINT) comes
    first."""
    args = workers() if processes == 2 else ()
    with running((*args, "--drain-delay-seconds", "0.2"), launcher=IGNORING[ignored]) as server:
        server.wait_for_logs("listening", processes)
        os.killpg(server.process.pid, ignored)
        with connect(server.target) as stub:
            game = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=30)
        assert len(game.seat_tokens) == 2
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(60) == 0
    assert_each_process_drained_on_sigterm(server, processes)


@pytest.mark.parametrize("processes", [1, 2], ids=["one_process", "workers"])
def test_sigterm_stops_a_server_started_with_it_ignored(processes):
    """docs/operations.md, "Termination": a terminal's SIGINT or SIGHUP ignored at start
    stays ignored, but SIGTERM always stops the server: an orchestrator's stop must not
    be lost to a launcher (a shell, a process manager) that left SIGTERM ignored."""
    args = workers() if processes == 2 else ()
    launcher = ("sh", "-c", 'trap "" TERM && exec "$@"', "sh")
    with running((*args, "--drain-delay-seconds", "0.2"), launcher=launcher) as server:
        server.wait_for_logs("listening", processes)
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(60) == 0
    assert_each_process_drained_on_sigterm(server, processes)
    assert len(server.log_events("stopped")) == processes


def _worker_pids(server: ServerProcess) -> dict[int, int]:
    """Each of the two workers' pid by its number, once both listen."""
    listening = server.wait_for_logs("listening", 2)
    return {int(str(line["worker"])): int(str(line["pid"])) for line in listening}


def test_a_worker_that_dies_stops_the_server_with_status_1():
    """Workers are not restarted one by one: the orchestrator restarts the server."""
    server = start_server(workers())
    try:
        pid_of = _worker_pids(server)
        assert set(pid_of) == {1, 2}
        os.kill(pid_of[2], signal.SIGKILL)  # the second: the first forked is no proof
        assert server.process.wait(60) == 1
    finally:
        server.kill()
    server.wait_for_logs("stopped")
    [exited] = server.log_events("worker exited")
    assert (exited["worker"], exited["pid"]) == (2, pid_of[2])
    assert (exited["signal"], exited["level"]) == ("SIGKILL", "error")
    assert [line["pid"] for line in server.log_events("stopped")] == [pid_of[1]]
    # The last line is the supervisor's, with its status: not the survivor's ``stopped``.
    [closing] = server.wait_for_logs("supervisor stopped")
    assert (closing["level"], closing["pid"], closing["exit_status"]) == (
        "error",
        server.process.pid,
        1,
    )
    assert server.logs[-1] == closing


def test_a_worker_that_stops_cleanly_on_its_own_still_stops_the_server_with_status_1():
    """docs/operations.md "Workers": a worker that exits on its own stops the server,
    whatever its status: one stopped by a SIGTERM of its own drains and exits 0, and the
    server must not serve on with fewer workers than it was given."""
    server = start_server(workers())
    try:
        pid_of = _worker_pids(server)
        os.kill(pid_of[2], signal.SIGTERM)
        assert server.process.wait(60) == 1
    finally:
        server.kill()
    server.wait_for_logs("stopped", 2)
    [exited] = server.log_events("worker exited")
    assert (exited["worker"], exited["exit_code"], exited["signal"]) == (2, 0, None)
    assert sorted(int(str(line["pid"])) for line in server.log_events("stopped")) == sorted(
        pid_of.values()
    )


@pytest.mark.parametrize("watchdog", ["0", "2"], ids=["no_watchdog", "watchdog"])
def test_a_worker_that_does_not_stop_is_killed_after_the_grace_period(watchdog):
    """A stopped (or deadlocked) worker would keep the supervisor waiting for good. Once
    stopping, the deadline alone judges the workers: the watchdog, silence being all it
    sees, would also kill a worker still exiting after its event loop ended, long before
    the deadline, and the server would exit 1 after a clean drain."""
    server = start_server(
        (*workers(), "--grace-seconds", "1", "--worker-timeout-seconds", watchdog)
    )
    try:
        pid_of = _worker_pids(server)
        os.kill(pid_of[2], signal.SIGSTOP)
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(60) == 1
        waited = time.monotonic() - started
    finally:
        server.kill()
    # The drain delay (0 here) and the grace period, then a margin of 5 s.
    assert waited >= 1 + 5
    [late] = server.log_events("workers did not stop in time")
    # A list of worker numbers, never under ``workers``, which is a count in ``starting
    # workers``: a strict log mapping (BigQuery, Loki's json stage) takes one type a name.
    assert late["unstopped_workers"] == [2] and "workers" not in late
    [starting] = server.log_events("starting workers")
    assert starting["workers"] == 2
    assert not server.log_events("worker hung")
    [exited] = server.log_events("worker exited")
    assert (exited["worker"], exited["signal"]) == (2, "SIGKILL")
    assert [line["pid"] for line in server.log_events("stopped")] == [pid_of[1]]


def test_workers_in_their_drain_delay_are_not_killed_as_stragglers():
    """The deadline runs from the first stop signal over the drain delay too."""
    with running((*workers(), "--drain-delay-seconds", "7", "--grace-seconds", "1")) as server:
        server.wait_for_logs("listening", 2)
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(60) == 0
    assert not server.log_events("workers did not stop in time")


def test_metrics_are_served_through_the_workers_drain():
    """docs/operations.md, "Termination": as a single process does, until the workers are
    gone. A supervisor that stopped them at the first signal left Prometheus blind for
    the whole drain, and the calls answered in it uncounted."""
    args = (*workers(), "--drain-delay-seconds", "600", "--metrics-port", str(free_port()))
    with running(args) as server:
        server.wait_for_logs("listening", 2)
        server.process.send_signal(signal.SIGTERM)
        server.wait_for_logs("draining", 2)
        with connect(server.target) as stub:
            stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=30)
        assert handled(server.metrics_url, "NewGame", "OK") == 1
        server.process.send_signal(signal.SIGINT)  # the rest of the delay skipped
        assert server.process.wait(60) == 0


def test_repeated_ctrl_c_does_not_push_the_deadline_back():
    """Every SIGINT is forwarded, but the deadline stays that of the first stop signal:
    a terminal whose user keeps pressing Ctrl-C still gets the hung worker killed."""
    server = start_server((*workers(), "--grace-seconds", "1"))
    try:
        os.kill(_worker_pids(server)[2], signal.SIGSTOP)
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        while server.process.poll() is None and time.monotonic() - started < 30:
            server.process.send_signal(signal.SIGINT)
            time.sleep(0.5)
        assert server.process.wait(60) == 1
        waited = time.monotonic() - started
    finally:
        server.kill()
    assert waited < 20  # the deadline: 1 + 5 s; re-armed by each SIGINT, never


def _cpu_seconds_over(pid: int, seconds: float) -> float:
    """The CPU time ``pid`` takes over the next ``seconds``."""
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return cpu_seconds(pid) - before


def test_the_supervisor_sleeps_while_it_serves_and_while_it_waits_for_a_stopped_worker():
    """It waits for its signals, or for the deadline (here 6 s after SIGTERM): no loop
    that polls."""
    server = start_server((*workers(), "--grace-seconds", "1"))
    try:
        pid_of = _worker_pids(server)
        serving = _cpu_seconds_over(server.process.pid, 3)
        os.kill(pid_of[2], signal.SIGSTOP)
        server.process.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        waiting = _cpu_seconds_over(server.process.pid, 3)
        assert server.process.wait(60) == 1
    finally:
        server.kill()
    assert serving < 0.2 and waiting < 0.2


def test_a_worker_killed_under_a_supervisor_started_with_sigchld_ignored_stops_it():
    """An ignored SIGCHLD survives exec: the kernel would reap the workers unseen."""
    launcher = (
        sys.executable,
        "-c",
        "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
        "os.execv(sys.argv[1], sys.argv[1:])",
    )
    server = start_server((*workers(), "--worker-timeout-seconds", "0"), launcher=launcher)
    try:
        os.kill(_worker_pids(server)[2], signal.SIGKILL)
        assert server.process.wait(30) == 1
    finally:
        server.kill()
    assert [line["worker"] for line in server.log_events("worker exited")] == [2]


# The console script with the check that the ports are free (``service.ports.taken``) made to find
# every port free, as if the metrics port were taken just after it.
SCRIPT_PORTS_TAKEN_AFTER_THE_CHECK = """
import importlib.abc, importlib.util, sys
class SkipThePortCheck(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "service.ports":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            module.taken = lambda host, port: None
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, SkipThePortCheck())
del sys.argv[1]  # the console script, which the launcher was given to run
from service.entry import main
raise SystemExit(main())
"""


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["sigint", "sigint_ignored"])
def test_a_metrics_port_taken_after_the_check_stops_the_workers_at_once(sigint_ignored):
    """The supervisor stops the workers it started as with Ctrl-C, which skips the drain
    delay, or, when it was started ignoring SIGINT (as a script's background job), with
    SIGTERM: the workers ignore SIGINT too, and served on until killed at the deadline."""
    ignoring = ("sh", "-c", 'trap "" INT && exec "$@"', "sh") if sigint_ignored else ()
    launcher = (*ignoring, sys.executable, "-c", SCRIPT_PORTS_TAKEN_AFTER_THE_CHECK)
    delay = "2" if sigint_ignored else "600"
    with port_taken() as port:
        started = time.monotonic()
        server = start_server(
            (*workers(), "--metrics-port", str(port), "--drain-delay-seconds", delay),
            launcher=launcher,
        )
        try:
            assert server.process.wait(60) == 1
        finally:
            server.kill()
    assert time.monotonic() - started < 20
    assert server.log_events("cannot listen")
    assert not server.log_events("workers did not stop in time")
    assert len(server.log_events("stopped")) == 2


def test_stragglers_are_killed_before_the_supervisor_logs_them():
    """A log reader that stops reading blocks every write to stdout, the workers' (which
    then cannot stop) and the supervisor's: it kills the workers it waited for before it
    writes its line about them, or it would wait at that line with them serving on."""
    grpc_port, http_port = free_ports(2)
    ports = ("--grpc-port", str(grpc_port), "--http-port", str(http_port), "--metrics-port", "0")
    stops = ("--grace-seconds", "1", "--worker-timeout-seconds", "0")
    process = start_session(
        [CARDRULES, "serve", "--host", "127.0.0.1", *ports, *WORKERS, *stops],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=server_environment(),
    )
    try:
        assert process.stdout is not None
        pids: list[int] = []
        while len(pids) < 2:
            line = process.stdout.readline()
            assert line, "the server exited before it listened"
            if (event := json.loads(line))["event"] == "listening":
                pids.append(int(event["pid"]))
        stdout = process.stdout.fileno()
        fcntl.fcntl(stdout, fcntl.F_SETPIPE_SZ, 4096)  # one page: full after a few lines
        with connect(f"127.0.0.1:{grpc_port}") as stub:
            for _ in range(200):
                queued = struct.unpack("i", fcntl.ioctl(stdout, termios.FIONREAD, b"\0" * 4))
                if queued[0] > 3500:
                    break
                try:
                    stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=1)
                except grpc.RpcError:  # a worker waits at its log line
                    break
        process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30  # the supervisor's own: 1 + 5 s
        while any(is_running(pid) for pid in pids):
            assert time.monotonic() < deadline, "the workers were not killed"
            time.sleep(0.1)
        rest = process.stdout.read()  # the supervisor's line can go now
        assert process.wait(30) == 1
    finally:
        kill_group(process)
    assert '"workers did not stop in time"' in rest


@pytest.mark.parametrize("hung", [(2,), (1, 2)], ids=["one", "both"])
def test_a_worker_that_hangs_while_serving_is_killed_and_the_server_stops(hung):
    """The kernel would go on handing a hung worker its share of new connections."""
    server = start_server((*workers(), "--worker-timeout-seconds", "2", "--grace-seconds", "1"))
    try:
        pid_of = _worker_pids(server)
        for worker in hung:
            os.kill(pid_of[worker], signal.SIGSTOP)
        assert server.process.wait(60) == 1
    finally:
        server.kill()
    # Only the hung workers: an idle one, silent as long, still beat. Two stopped at
    # once fall silent from their own last beats, which may be a check of the watch
    # apart; the stop that the first one's kill begins ends the watch, and the other is
    # killed at the stop's deadline, as a worker that did not stop in time (1 in 13
    # runs beside a busy core, a review found).
    hung_lines = server.log_events("worker hung")
    reported = sorted(int(str(line["worker"])) for line in hung_lines)
    late = [
        int(str(worker))
        for line in server.log_events("workers did not stop in time")
        for worker in cast(list[object], line["unstopped_workers"])
    ]
    assert reported and sorted(reported + late) == list(hung), (reported, late)
    assert {line["pid"] for line in hung_lines} == {pid_of[worker] for worker in reported}
    assert {line["level"] for line in hung_lines} == {"error"}
    # Over the timeout (logged to 0.1 s, so 2.04 reads 2.0); by how much depends on how
    # busy the machine was.
    assert all(float(str(line["silent_seconds"])) >= 2 for line in hung_lines), hung_lines
    exited = server.log_events("worker exited")
    assert sorted((int(str(line["worker"])), str(line["signal"])) for line in exited) == [
        (worker, "SIGKILL") for worker in hung
    ]
    assert [line["pid"] for line in server.log_events("stopped")] == [
        pid_of[worker] for worker in (1, 2) if worker not in hung
    ]


def test_workers_drain_and_stop_when_their_supervisor_is_killed():
    """A supervisor killed with SIGKILL cannot stop its workers; they see their lifeline
    cut and drain instead of serving on, with SO_REUSEPORT beside a restarted server."""
    server = start_server(workers())
    try:
        listening = server.wait_for_logs("listening", 2)
        server.process.kill()
        server.process.wait()
        cut = server.wait_for_logs("supervisor exited", 2)
        stopped = server.wait_for_logs("stopped", 2)
        # "stopped" comes before a worker's exit, and its coverage data (make coverage)
        # is written at exit: the group killed below, or pytest-cov combining first,
        # would lose it and leave a stray .coverage file. A zombie (exited, its parent
        # killed, not yet reaped by init) is done writing: is_running counts it gone.
        exiting = [cast(int, line["pid"]) for line in stopped]
        deadline = time.monotonic() + 10
        while left := [pid for pid in exiting if is_running(pid)]:
            assert time.monotonic() < deadline, f"workers {left} still run once stopped"
            time.sleep(0.05)
    finally:
        server.kill()
    pids = {line["pid"] for line in listening}
    assert len(pids) == 2
    assert {line["pid"] for line in cut} == pids == {line["pid"] for line in stopped}
    assert {line["level"] for line in cut} == {"error"}
    with (
        pytest.raises(ConnectionRefusedError),
        socket.create_connection(("127.0.0.1", server.grpc_port), timeout=10),
    ):
        pass


@pytest.mark.parametrize("unbuffered", ["", "1"], ids=["as_make_serve", "as_the_image"])
@pytest.mark.parametrize("args", [(), WORKERS], ids=["one_process", "workers"])
def test_a_log_reader_that_goes_away_loses_lines_but_no_call(args, unbuffered):
    """Once stdout's reader is gone every write fails (EPIPE); the calls must not fail
    with it. The lost lines are counted and reported once on stderr.

    With or without ``PYTHONUNBUFFERED`` (the image sets it, ``make serve`` does not):
    a buffered stdout kept the refused lines and failed on them again at exit, where
    Python turned status 0 into 120."""
    processes = 2 if args else 1
    grpc_port, http_port, metrics_port = free_ports(3)
    ports = {"--grpc-port": grpc_port, "--http-port": http_port, "--metrics-port": metrics_port}
    flags = [text for flag, port in ports.items() for text in (flag, str(port))]
    process = start_session(
        [CARDRULES, "serve", "--host", "127.0.0.1", *flags, *args],
        env=server_environment({"PYTHONUNBUFFERED": unbuffered}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        # Every start-up line read before the reader goes: with workers, the supervisor's
        # own (`metrics`) may come after theirs, and would be one more loss to report.
        listening: list[dict[str, object]] = []
        metrics_line_read = False
        while len(listening) < processes or not metrics_line_read:
            line = process.stdout.readline()
            assert line, "the server exited before it listened"
            event = json.loads(line)
            if event["event"] == "listening":
                listening.append(event)
            metrics_line_read = metrics_line_read or event["event"] == "metrics"
        process.stdout.close()
        assert {line["http_port"] for line in listening} == {http_port}
        calls = 6
        with connect(f"127.0.0.1:{grpc_port}") as stub:
            for _ in range(calls):
                game = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=30)
                assert len(game.seat_tokens) == 2
        for _ in range(calls):
            request = urllib.request.Request(
                f"http://127.0.0.1:{http_port}/v1/krypkasino:newGame",
                data=b'{"config": {"players": 2}}',
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=30) as answer:
                assert answer.status == 200
        metrics = metric_samples(f"http://127.0.0.1:{metrics_port}/metrics")
        assert metrics[("cardrules_log_lines_dropped_total", frozenset())] >= 2 * calls
        handled = {
            dict(labels)["grpc_code"]: value
            for (name, labels), value in metrics.items()
            if name == "grpc_server_handled_total" and ("grpc_method", "NewGame") in labels
        }
        assert handled["OK"] == 2 * calls and sum(handled.values()) == 2 * calls
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        kill_group(process)
    assert process.returncode == 0
    notes = stderr.splitlines()
    # Once per process that logs requests, and with workers once more for the supervisor,
    # whose closing line (``supervisor stopped``) is lost too.
    writers = processes + 1 if args else processes
    assert len(notes) == writers, stderr
    assert all("are lost from now on" in note and "BrokenPipeError" in note for note in notes)
    # Each names its process: with workers, two notes alike said nothing of which.
    named = {found[1] for note in notes if (found := re.search(r"of process (\d+) are", note))}
    assert len(named) == writers, stderr
    assert str(process.pid) in named


def open_files_limits(pid: int) -> tuple[int, int]:
    """The soft and hard ``RLIMIT_NOFILE`` of ``pid``, from ``/proc``."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no open files limit")


def test_the_soft_open_files_limit_is_raised_to_the_hard_one():
    """Every connection holds a descriptor: a soft limit of 1,024 (a common default)
    would stop the server accepting at about a thousand idle clients."""
    launcher = ("sh", "-c", 'ulimit -S -n 256 && exec "$@"', "sh")
    with running(launcher=launcher) as server:
        soft, hard = open_files_limits(server.process.pid)
    assert soft == hard > 256


def test_running_out_of_descriptors_is_logged_once_and_serving_resumes():
    """asyncio reports every accept that fails for want of a descriptor, tens of
    thousands of lines a second; the server logs one line per 10 s."""
    launcher = ("sh", "-c", 'ulimit -n 64 && exec "$@"', "sh")
    with running(launcher=launcher, failures_expected=True) as server:
        assert open_files_limits(server.process.pid) == (64, 64)
        connections = []
        try:
            for _ in range(100):
                connections.append(socket.create_connection(("127.0.0.1", server.http_port)))
            time.sleep(2)
        finally:
            for connection in connections:
                connection.close()
        [line] = server.wait_for_logs("no file descriptors left: connections wait to be accepted")
        assert line["level"] == "error" and "Too many open files" in str(line["error"])
        # The kernel finds a descriptor before it looks at the queue, so an accept can fail
        # for want of one with no connection waiting: when the server had kept pace with
        # the connections until then, the first line rightly says 0 (a full CI run saw it).
        # That the count is the queue's is checked with a queue of known length below.
        assert isinstance(line["held_back"], int) and 0 <= line["held_back"] <= len(connections)
        # As ``cannot listen`` names them: which listener, and its address.
        assert (line["listener"], line["address"]) == ("http", f"127.0.0.1:{server.http_port}")
        with connect(server.target) as stub:
            game = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=30)
        assert len(game.seat_tokens) == 2
    assert not server.log_events("Exception in callback")


@contextmanager
def listener_with_waiting(count: int) -> Iterator[socket.socket]:
    """A listening socket with ``count`` connections in its accept queue (Linux's
    ``tcpi_unacked`` of a listener, read here to wait for the handshakes to end)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        clients = [socket.create_connection(listener.getsockname()) for _ in range(count)]
        try:
            deadline = time.monotonic() + 10
            while (
                struct.unpack_from(
                    "=I", listener.getsockopt(socket.SOL_TCP, socket.TCP_INFO, 104), 24
                )[0]
                < count
            ):
                assert time.monotonic() < deadline, "the connections never reached the queue"
                time.sleep(0.01)
            yield listener
        finally:
            for client in clients:
                client.close()


def test_accept_errors_are_logged_once_per_window_with_the_connections_held_back(caplog):
    """``held_back`` is how many connections wait in the listener's queue (Linux); it
    counted the reports held back, so it said 0 in the first line of every episode
    while connections waited. Other loop errors still go to asyncio's own handler."""
    now = [0.0]
    handler = AcceptErrorsOncePerWindow(window=10, clock=lambda: now[0])
    loop = asyncio.new_event_loop()
    try:
        with listener_with_waiting(3) as listener, structlog.testing.capture_logs() as logged:
            failed = {
                "message": AcceptErrorsOncePerWindow.MESSAGE,
                "exception": OSError(24, "x"),
                "socket": listener,
            }
            for moment in (0.0, 1.0, 9.9, 10.0, 12.0):
                now[0] = moment
                handler(loop, failed)
            listener.accept()[0].close()
            now[0] = 20.0
            handler(loop, failed)
            handler(loop, {"message": "something else"})
            port = listener.getsockname()[1]
    finally:
        loop.close()
    assert [line["held_back"] for line in logged] == [3, 3, 2]
    assert {(line["listener"], line["address"]) for line in logged} == {
        ("http", f"127.0.0.1:{port}")
    }
    assert {line["event"] for line in logged} == {
        "no file descriptors left: connections wait to be accepted"
    }
    assert [record.getMessage() for record in caplog.records] == ["something else"]


def test_an_accept_error_without_its_socket_is_still_logged():
    handler = AcceptErrorsOncePerWindow()
    loop = asyncio.new_event_loop()
    try:
        with structlog.testing.capture_logs() as logged:
            handler(loop, {"message": AcceptErrorsOncePerWindow.MESSAGE})
    finally:
        loop.close()
    assert [(line["held_back"], line["listener"], line["address"]) for line in logged] == [
        (None, "http", None)
    ]


def test_accept_errors_are_logged_once_per_ten_seconds_by_default_with_an_ipv6_address():
    """docs/operations.md ("Sizing") says at most once per 10 s; an IPv6 listener's
    address is bracketed before its port, as ``cannot listen`` writes it. A loop error of
    another kind first is asyncio's own and takes no report of the window."""
    now = [0.0]
    handler = AcceptErrorsOncePerWindow(clock=lambda: now[0])
    host = "::1" if ipv6_available() else "127.0.0.2"
    [(family, address)] = resolved_addresses(host, 0)
    loop = asyncio.new_event_loop()
    try:
        with (
            socket.create_server(address, family=family) as listener,
            structlog.testing.capture_logs() as logged,
        ):
            handler(loop, {"message": "something else"})
            failed = {"message": AcceptErrorsOncePerWindow.MESSAGE, "socket": listener}
            for moment in (1.0, 10.9, 11.0):
                now[0] = moment
                handler(loop, failed)
            port = listener.getsockname()[1]
    finally:
        loop.close()
    assert [line["address"] for line in logged] == [host_port(host, port)] * 2


def test_a_closed_stdout_at_start_exits_2_with_one_line():
    """Python gives a closed stdout as None; the first log line was a traceback."""
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", CARDRULES, "serve", "--grpc-port", "0"],
        env=server_environment(),
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == "cardrules: error: stdout is closed: the log lines have nowhere to go\n"


def test_a_child_that_is_no_worker_exiting_leaves_the_server_serving(tmp_path):
    """As PID 1 of a container the supervisor also reaps orphans, which are no workers.

    ``sh`` starts a ``sleep`` and then becomes the server (exec), so the supervisor
    has a child that is no worker, as an orphan re-parented to PID 1 would be.
    """
    stray_pid_file = tmp_path / "stray.pid"
    launcher = (
        "sh",
        "-c",
        f'sleep 1 & echo $! > {shlex.quote(str(stray_pid_file))} && exec "$@"',
        "sh",
    )
    with running(workers(), launcher=launcher) as server:
        server.wait_for_logs("listening", 2)
        stray = int(stray_pid_file.read_text())
        deadline = time.monotonic() + 30
        while _exists(stray):  # a zombie still exists: gone means the supervisor reaped it
            assert time.monotonic() < deadline, "the supervisor never reaped its child"
            time.sleep(0.05)
        with grpc.insecure_channel(server.target) as channel:
            reply = health(channel).Check(
                health_pb2.HealthCheckRequest(service="readiness"), timeout=10
            )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    assert server.log_events("worker exited") == []


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def blocked_signals(pid: int, thread: int) -> set[signal.Signals]:
    """The signals ``thread`` of process ``pid`` blocks (``SigBlk`` of /proc)."""
    status = Path(f"/proc/{pid}/task/{thread}/status").read_text()
    mask = int(
        next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16
    )
    return {signum for signum in signal.Signals if mask >> (signum - 1) & 1}


def assert_only_the_main_thread_takes(pid: int, taken: set[signal.Signals]) -> None:
    threads = sorted(int(task.name) for task in Path(f"/proc/{pid}/task").iterdir())
    assert len(threads) >= 2
    assert not blocked_signals(pid, pid) & taken
    for thread in threads:
        if thread == pid:
            continue
        try:  # a scrape's threads end as it does: one may be gone since the listing
            blocked = blocked_signals(pid, thread)
            name = Path(f"/proc/{pid}/task/{thread}/comm").read_text().strip()
        except (FileNotFoundError, ProcessLookupError):  # gone, or exiting: ESRCH
            continue
        assert blocked >= taken, (pid, thread, name)


def assert_every_thread_blocks_and_the_main_one_waits_for(
    pid: int, taken: set[signal.Signals]
) -> None:
    """The supervisor's way: its main thread takes ``taken`` by waiting for them
    (``sigtimedwait``, which unblocks them for as long as it waits), and every other
    thread blocks them."""
    threads = sorted(int(task.name) for task in Path(f"/proc/{pid}/task").iterdir())
    assert len(threads) >= 2  # the watchdog's, the metrics server's
    assert Path(f"/proc/{pid}/task/{pid}/wchan").read_text().startswith("do_sigtimedwait")
    for thread in (thread for thread in threads if thread != pid):
        with suppress(FileNotFoundError, ProcessLookupError):  # a scrape's thread, ended
            assert blocked_signals(pid, thread) >= taken, (pid, thread)


STOPS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


@pytest.mark.parametrize("processes", [1, 2], ids=["one_process", "workers"])
def test_only_the_main_thread_of_each_process_takes_its_signals(processes):
    """The kernel hands a signal sent to a process to any of its threads that does not
    block it, but Python runs handlers in the main thread only. In the supervisor a stop
    signal another thread took waited until ``os.wait`` returned for a worker's exit, and
    back-to-back signals left the server serving, readiness SERVING, until killed: now
    every thread of it blocks them, and its main thread waits for them. In a server, a
    repeat taken by a thread of grpc's as asyncio let go of the signals at the end of
    serving met the default action, and killed it."""
    args = (*workers(), "--worker-timeout-seconds", "5") if processes == 2 else ()
    with running((*args, "--metrics-port", str(free_port()))) as server:
        listening = server.wait_for_logs("listening", processes)
        server.wait_for_logs("metrics")
        with connect(server.target) as stub:
            for _ in range(20):
                stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=30)
        assert metric_samples(server.metrics_url)
        for line in listening:
            assert_only_the_main_thread_takes(int(str(line["pid"])), STOPS)
        if processes == 2:
            assert_every_thread_blocks_and_the_main_one_waits_for(
                server.process.pid, {*STOPS, signal.SIGCHLD}
            )


# The console script with a hook in asyncio's removal of a signal handler, in the server and
# each worker: as ``StopSignals.finished`` lets go of ``REPEAT``, which puts it back to its
# default action for a moment (SIG_DFL; for SIGINT Python's default_int_handler), the
# process sends it to itself and waits 0.1 s there, long enough for any thread able to take
# it to do so. First it names, on a line that is no JSON, each thread that could.
SCRIPT_REPEAT_AS_SERVING_LETS_GO = """
import asyncio, os, signal, sys, time
from pathlib import Path
REPEAT = signal.Signals[os.environ["REPEAT"]]
STOPS = sum(1 << (s - 1) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP))
def taking_threads():
    names = []
    for task in Path("/proc/self/task").iterdir():
        try:
            status = (task / "status").read_text()
            name = (task / "comm").read_text().strip()
        except (FileNotFoundError, ProcessLookupError):  # gone, or exiting: ESRCH
            continue
        blocked = next(l for l in status.splitlines() if l.startswith("SigBlk:")).split()[1]
        if int(task.name) != os.getpid() and int(blocked, 16) & STOPS != STOPS:
            names.append(name)
    return names
let_go = asyncio.SelectorEventLoop.remove_signal_handler
def let_go_then_repeat(self, signum):
    removed = let_go(self, signum)
    if signum == REPEAT:
        if taking := taking_threads():
            print("threads that take stop signals:", taking, file=sys.stderr, flush=True)
        os.kill(os.getpid(), signum)
        time.sleep(0.1)
    return removed
asyncio.SelectorEventLoop.remove_signal_handler = let_go_then_repeat
del sys.argv[1]  # the console script, which the launcher was given to run
from service.entry import main
raise SystemExit(main())
"""


@pytest.mark.parametrize(
    ("repeat", "processes"),
    [(signal.SIGTERM, 1), (signal.SIGINT, 1), (signal.SIGINT, 2)],
    ids=["sigterm-one_process", "sigint-one_process", "sigint-workers"],
)
def test_a_stop_signal_just_as_serving_lets_go_of_them_changes_nothing(repeat, processes):
    """``StopSignals.finished`` ignores the stop signals from the end of serving on, through
    asyncio's removal of its handlers, which puts each back to its default action first. A
    repeat in that moment (the supervisor forwards every Ctrl-C) would kill the process
    (143), or raise KeyboardInterrupt (130; a worker's crash, status 1), were there a thread
    to take it: none may. Here the repeat comes in that very moment, which the test of
    repeats until the process is gone meets by chance only."""
    args = workers() if processes == 2 else ()
    launcher = (sys.executable, "-c", SCRIPT_REPEAT_AS_SERVING_LETS_GO)
    with running(
        (*args, "--drain-delay-seconds", "0"), {"REPEAT": repeat.name}, launcher=launcher
    ) as server:
        server.wait_for_logs("listening", processes)
        server.process.send_signal(signal.SIGTERM)
        # terminate: the whole log read, for the threads named and any traceback.
        assert server.terminate(60) == 0, failure_lines(server)
    assert len(server.log_events("stopped")) == processes


# The console script with a hook in the end of the supervisor's watch on its workers,
# which the first stop signal calls: holding a lock, as ``threading.Event.set`` does, the
# supervisor sends itself ``REPEAT`` and waits 0.1 s, so that a handler run in the middle
# of the first stop meets the lock again.
SCRIPT_REPEAT_AS_THE_SUPERVISOR_STOPS = """
import os, signal, sys, threading, time
import service.watchdog
REPEAT = signal.Signals[os.environ["REPEAT"]]
watch = service.watchdog.start_watchdog
def watch_with_a_repeat(*args):
    end = watch(*args)
    held = threading.Lock()
    def end_with_a_repeat():
        with held:
            if threading.current_thread() is threading.main_thread():
                os.kill(os.getpid(), REPEAT)
                time.sleep(0.1)
            end()
    return end_with_a_repeat
service.watchdog.start_watchdog = watch_with_a_repeat
del sys.argv[1]  # the console script, which the launcher was given to run
from service.entry import main
raise SystemExit(main())
"""


@pytest.mark.parametrize("repeat", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_stop_signal_while_the_supervisor_stops_changes_nothing(repeat):
    """The supervisor takes its signals one at a time, between its own steps: a second
    Ctrl-C, or the SIGTERM that follows a Ctrl-C, that came while it acted on the first
    ran its handler in the middle of the first, which met a lock the first held (the
    end of the watch) and waited for it for good, serving on until killed."""
    launcher = (sys.executable, "-c", SCRIPT_REPEAT_AS_THE_SUPERVISOR_STOPS)
    with running(
        (*workers(), "--drain-delay-seconds", "0"), {"REPEAT": repeat.name}, launcher=launcher
    ) as server:
        server.wait_for_logs("listening", 2)
        server.process.send_signal(signal.SIGTERM)
        assert server.terminate(30) == 0
    assert len(server.log_events("stopped")) == 2


def test_the_workers_temporary_metrics_folder_is_removed_at_exit(tmp_path):
    with running(workers(), {"TMPDIR": str(tmp_path)}) as server:
        server.wait_for_logs("listening", 2)
        [folder] = tmp_path.glob("cardrules-metrics-*")
        assert list(folder.glob("*.db"))
    assert not folder.exists()


def test_the_temporary_metrics_folder_of_a_killed_server_is_removed_at_the_next_start(tmp_path):
    """A supervisor killed outright (SIGKILL) cannot remove its folder; in a pod's
    ``emptyDir`` /tmp, which outlives the container, each such restart left its values
    behind until the folder had no room for a server to start."""
    env = {"TMPDIR": str(tmp_path)}
    killed = start_server(workers(), env)
    try:
        killed.wait_for_logs("listening", 2)
        [abandoned] = tmp_path.glob("cardrules-metrics-*")
        killed.process.kill()
        killed.wait_for_logs("stopped", 2)  # the orphaned workers drain and exit
        with (abandoned / ".in-use").open("rb") as lock:  # ... and are gone
            deadline = time.monotonic() + 30
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
        with running(workers(), env) as server:
            server.wait_for_logs("listening", 2)
            assert not abandoned.exists()
            [folder] = tmp_path.glob("cardrules-metrics-*")
            # A second server's start leaves the running one's folder alone.
            assert serve_and_fail(*workers(), "--http-port", str(server.http_port), env=env)
            assert list(tmp_path.glob("cardrules-metrics-*")) == [folder]
    finally:
        killed.kill()
    assert not list(tmp_path.glob("cardrules-metrics-*"))


# Makes metrics folders as servers do at start, 300 times, while a thread removes the
# abandoned ones in a loop, as servers starting at the same moment do; prints how many
# of the starts failed, or made a folder that was gone at once.
SCRIPT_FOLDERS_MADE_BESIDE_A_REMOVER = """
import os, sys, threading
from pathlib import Path
from service.config import MULTIPROC_ENV
from service.serve_command import prepare_multiprocess_dir, remove_abandoned_folders
done = threading.Event()
def remove():
    while not done.is_set():
        remove_abandoned_folders(sys.argv[1])
remover = threading.Thread(target=remove)
remover.start()
lost = 0
for _ in range(300):
    os.environ.pop(MULTIPROC_ENV, None)
    try:
        lost += not Path(prepare_multiprocess_dir()).exists()
    except OSError:  # removed between its making and the check of its room
        lost += 1
done.set()
remover.join()
print(lost)
"""


def test_a_server_starting_beside_others_keeps_its_metrics_folder(tmp_path):
    """Each start removes the folders of servers killed outright: a folder whose lock
    file was made but not yet locked looked abandoned, and was removed under the server
    that had just made it."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT_FOLDERS_MADE_BESIDE_A_REMOVER, str(tmp_path)],
        env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"]
    assert len(list(tmp_path.glob("cardrules-metrics-*"))) == 300


def _delete_folder(folder: Path) -> None:
    shutil.rmtree(folder)


def _replace_folder(folder: Path) -> None:
    shutil.rmtree(folder)
    folder.mkdir()


def _delete_files(folder: Path) -> None:  # as cleaners of temporary files do first
    for values in folder.glob("*.db"):
        values.unlink()


@pytest.mark.parametrize(
    ("delete", "reason"),
    [
        (_delete_folder, "the workers' metrics folder {folder} is gone"),
        (_replace_folder, "the workers' metrics folder {folder} is gone"),
        (_delete_files, "{files} of the workers' metrics files in {folder} are gone ("),
    ],
    ids=["folder", "folder_replaced", "files"],
)
def test_deleted_metrics_values_make_metrics_answer_503_while_calls_go_on(delete, reason, tmp_path):
    """Deleted values (``rm -rf``, a cleaner of temporary files) made ``/metrics`` answer
    200 with less or nothing in it: a scrape that read as a server that served nothing."""
    folder = tmp_path / "metrics"
    env = {"PROMETHEUS_MULTIPROC_DIR": str(folder)}
    with running(
        (*workers(), "--metrics-port", str(free_port())), env, failures_expected=True
    ) as server:
        server.wait_for_logs("listening", 2)
        server.wait_for_logs("metrics")
        assert metric_samples(server.metrics_url)  # seen once, as Prometheus sees them
        files = len([name for name in folder.glob("*.db") if name.stem.split("_")[0] != "gauge"])
        delete(folder)
        with connect(server.target) as stub:
            stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=30)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(server.metrics_url, timeout=10)
        with refused.value:
            assert refused.value.code == 503
            answer = refused.value.read().decode()
        [line] = server.wait_for_logs("metrics unavailable")
    assert answer == f"{line['error']}\n"
    assert str(line["error"]).startswith(reason.format(folder=folder, files=files))
    assert str(line["error"]).endswith(
        ": their values cannot be read until the server is restarted"
    )
    assert line["level"] == "error"


@pytest.mark.parametrize("variable", ["PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir"])
def test_an_unwritable_metrics_folder_exits_2_with_one_line(tmp_path, variable):
    """The line names the variable that was set, the deprecated lower-case one too, and
    says what to do with it: it ended "set PROMETHEUS_MULTIPROC_DIR to one", which was
    set already. (A file where the folder would be: as root, a mode cannot refuse.)"""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with launched(WORKERS, {variable: str(blocker / "metrics")}) as process:
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 2
    assert output.startswith(
        "cardrules: error: --workers needs a writable folder for the workers' metrics, and "
        f"the one {variable} names cannot be used ("
    )
    assert output.endswith(
        "); set it to a writable folder with room for them, or unset it for a temporary one\n"
    )
    assert "Not a directory" in output and output.count("\n") == 1


def test_an_unwritable_metrics_folder_names_the_workers_variable_that_asked_for_it(tmp_path):
    """As every other configuration error, the line names where the value came from."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {"CARDRULES_WORKERS": "2", "PROMETHEUS_MULTIPROC_DIR": str(blocker / "metrics")}
    with launched((), env) as process:
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 2
    assert output.startswith("cardrules: error: CARDRULES_WORKERS needs a writable folder")


def test_a_metrics_folder_is_created_with_its_parents(tmp_path):
    """docs/operations.md, "Workers": the folder is created if needed."""
    folder = tmp_path / "not" / "yet" / "metrics"
    with running(workers(), {"PROMETHEUS_MULTIPROC_DIR": str(folder)}) as server:
        server.wait_for_logs("listening", 2)
        assert list(folder.glob("*.db"))


def test_a_single_process_without_the_variable_keeps_its_metrics_in_memory(tmp_path):
    """Only ``--workers`` or the variable asks for a metrics folder (docs/operations.md,
    "Workers"): a lone server makes none, so a read-only filesystem does not stop it."""
    with running(("--workers", "1"), {"TMPDIR": str(tmp_path)}) as server:
        server.wait_for_logs("listening")
        assert not list(tmp_path.glob("cardrules-metrics-*"))


@pytest.mark.parametrize("variable", ["PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir"])
def test_an_unwritable_metrics_folder_with_one_worker_names_the_variable_not_workers(
    tmp_path, variable
):
    """With ``--workers 1`` only the variable asks for the folder; the line blamed
    ``--workers``, which the operator had not asked for."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with launched(("--workers", "1"), {variable: str(blocker / "metrics")}) as process:
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 2
    assert output.startswith(f"cardrules: error: {variable} is set, which keeps the metrics ")
    assert "multiprocess" in output and "unset it" in output
    assert "--workers" not in output and output.count("\n") == 1


@pytest.mark.parametrize("variable", ["PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir"])
@pytest.mark.parametrize("args", [WORKERS, ("--workers", "1")], ids=["workers", "one"])
def test_an_empty_metrics_folder_variable_exits_2_and_deletes_nothing(tmp_path, variable, args):
    """An empty value named the working folder: the server deleted every ``*.db`` there
    as an earlier run's values, and with workers its supervisor then crashed."""
    kept = tmp_path / "important.db"
    kept.write_text("precious")
    with launched(args, {variable: ""}, cwd=tmp_path) as process:
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 2
    assert "the variable is set but empty" in output and output.count("\n") == 1
    assert [path.name for path in tmp_path.iterdir()] == ["important.db"]
    assert kept.read_text() == "precious"


def test_a_metrics_folder_holding_other_files_exits_2_and_deletes_nothing(tmp_path):
    """prometheus_client reads every ``*.db`` file in its folder as its own; the server
    deletes only the values an earlier run left (``counter_1.db``), never a stranger's."""
    folder = tmp_path / "metrics"
    folder.mkdir()
    for name in ("important.db", "counter_1.db", "notes.txt"):
        (folder / name).write_text("kept")
    with launched(WORKERS, {"PROMETHEUS_MULTIPROC_DIR": str(folder)}) as process:
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 2
    assert "holds files that are not prometheus_client's (important.db)" in output
    assert output.count("\n") == 1
    assert sorted(path.name for path in folder.iterdir()) == [
        "counter_1.db",
        "important.db",
        "notes.txt",
    ]


def test_a_refused_metrics_folder_is_blamed_on_the_variable_in_force(tmp_path):
    """With both spellings set the upper-case one is the folder (docs/operations.md, "The
    metrics folder"), and its refusal names it; past three strangers' files it says more
    are there, so that removing those named is not mistaken for enough."""
    folder, other = tmp_path / "metrics", tmp_path / "other"
    folder.mkdir()
    other.mkdir()
    for name in ("a.db", "b.db", "c.db", "d.db"):
        (folder / name).write_text("kept")
    variables = {"PROMETHEUS_MULTIPROC_DIR": str(folder), "prometheus_multiproc_dir": str(other)}
    with launched(WORKERS, variables) as process:
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 2
    assert "and the one PROMETHEUS_MULTIPROC_DIR names cannot be used" in output, output
    assert "prometheus_multiproc_dir" not in output
    assert "holds files that are not prometheus_client's (a.db, b.db, c.db, ...)" in output


def in_use_line(folder: Path, variable: str = "PROMETHEUS_MULTIPROC_DIR") -> str:
    """The one line a server given a metrics folder another server uses exits 1 with."""
    return (
        f"cardrules: error: {variable}: another cardrules server uses {folder} for its "
        f"metrics (it holds {folder / '.in-use'} locked), or the workers of one killed "
        "outright are still draining: give each server a folder of its own\n"
    )


def games_started(url: str) -> float:
    found = metric_samples(url)
    return sum(v for (name, _), v in found.items() if name == "cardrules_games_started_total")


@pytest.mark.parametrize("args", [WORKERS, ("--workers", "1")], ids=["workers", "one"])
def test_a_second_server_given_a_metrics_folder_in_use_exits_1_and_deletes_nothing(tmp_path, args):
    """Two servers given the same folder on other ports: the second started without a
    word and emptied the folder, deleting the first's live files of values, whose
    metrics answered 503 from then on, its values lost, until a restart did the same
    to the second; with one process as with workers. The folder is locked as the
    server's own temporary one is, and a second server refused before it deletes
    anything."""
    folder = tmp_path / "metrics"
    env = {"PROMETHEUS_MULTIPROC_DIR": str(folder)}
    with serving_a_game_with_metrics_in(folder) as first:
        values = {path.name: path.stat().st_ino for path in folder.glob("*.db")}
        grpc_port, http_port = free_ports(2)
        second = serve_and_fail(
            *args, "--grpc-port", str(grpc_port), "--http-port", str(http_port), env=env
        )
        assert (second.returncode, second.stdout) == (1, "")
        assert second.stderr == in_use_line(folder)
        assert values and {p.name: p.stat().st_ino for p in folder.glob("*.db")} == values
        assert games_started(first.metrics_url) == 1


def test_a_metrics_folder_whose_lock_another_process_holds_exits_1(tmp_path):
    """Whoever holds the lock (an orphaned worker of a killed server still writes
    there), the folder is not emptied; the deprecated variable's name is the one told.
    Exit status 1, which a supervisor retries: the holder may be gone a moment later
    (orphaned workers drain and exit), unlike a setting refused with 2."""
    folder = tmp_path / "metrics"
    folder.mkdir()
    (folder / "counter_1.db").write_text("kept")
    with (folder / ".in-use").open("wb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        done = serve_and_fail(env={"prometheus_multiproc_dir": str(folder)})
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == in_use_line(folder, "prometheus_multiproc_dir")
    assert sorted(path.name for path in folder.iterdir()) == [".in-use", "counter_1.db"]
    assert (folder / "counter_1.db").read_text() == "kept"


def wait_until_unlocked(lock_file: Path, timeout: float = 30) -> None:
    """Wait until nothing holds ``lock_file`` locked, taking and releasing it."""
    with lock_file.open("rb") as lock:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                assert time.monotonic() < deadline, f"{lock_file} still locked"
                time.sleep(0.05)


def test_a_metrics_folder_left_by_a_dead_server_is_taken_and_emptied(tmp_path):
    """A dead server's lock file stays, unlocked (the kernel releases a dead process's
    locks): the next start takes the folder and deletes the values left there, as
    before. It holds the lock while it or a worker runs: a supervisor killed outright
    leaves it to its orphaned workers, which drain and exit, and then it is free."""
    folder = tmp_path / "metrics"
    folder.mkdir()
    (folder / ".in-use").touch()
    (folder / "counter_1.db").write_bytes(b"")  # an earlier run's values
    server = start_server(workers(), {"PROMETHEUS_MULTIPROC_DIR": str(folder)})
    try:
        server.wait_for_logs("listening", 2)
        assert not (folder / "counter_1.db").exists()
        assert list(folder.glob("counter_*.db"))
        with (folder / ".in-use").open("rb") as lock, pytest.raises(BlockingIOError):
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        server.process.kill()
        server.wait_for_logs("stopped", 2)  # the orphaned workers drain and exit
        wait_until_unlocked(folder / ".in-use")
    finally:
        server.kill()


@pytest.mark.parametrize("host", ["::1", "[::1]"])
def test_an_ipv6_host_serves_grpc_http_and_metrics(host):
    args = ("--host", host, "--grpc-port", "0", "--metrics-port", str(free_port()))
    with running(args, loopback_flags=False) as server:
        [listening] = server.log_events("listening")
        assert listening["grpc"] == f"[::1]:{server.grpc_port}"
        with grpc.insecure_channel(f"[::1]:{server.grpc_port}") as channel:
            reply = health(channel).Check(
                health_pb2.HealthCheckRequest(service="readiness"), timeout=10
            )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        with urllib.request.urlopen(f"http://[::1]:{server.http_port}/openapi.json") as reply:
            assert json.load(reply)["openapi"].startswith("3.1")
        with urllib.request.urlopen(f"http://[::1]:{server.metrics_port}/metrics") as reply:
            assert b"grpc_server_started_total" in reply.read()
        score = urllib.request.Request(
            f"http://[::1]:{server.http_port}/v1/krypkasino:score",
            data=b"{}",
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError):  # STATE_MISSING, but logged with its peer
            urllib.request.urlopen(score)
        [line] = server.wait_for_logs("request")
        assert str(line["peer"]).startswith("ipv6:[::1]:")


@pytest.mark.parametrize(
    "host",
    # Dotted digits are an IPv4 address or nothing; a name is letters, digits and hyphens.
    [
        *("[]", "[::1", "a b", "http://x", "a..b", "x" * 64 + ".example"),
        *("999.1.1.1", "1.2.3.4.5", "a+b=", "a.-b.example", "foo-.example"),
    ],
)
def test_a_host_that_is_no_name_or_address_exits_2(host):
    done = serve_and_fail("--host", host)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"cardrules: error: --host: {host!r} is not a host name or address\n"


@pytest.mark.parametrize("host", ["127.1", "0x7f.1", "0x7f000001"])
def test_an_ipv4_address_in_short_form_is_refused_naming_its_four_numbers(host):
    """Python's resolver took them, grpc's did not: the server failed to bind, with the
    blame on ``--grpc-port`` (a review of the host check)."""
    done = serve_and_fail("--host", host)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"cardrules: error: --host: {host!r} is an IPv4 address in short form: give its four "
        "numbers, 127.0.0.1\n"
    )


def test_an_ipv4_address_in_ipv6_form_is_refused_naming_its_ipv4_form():
    """grpc listened on ``::ffff:127.0.0.1`` and the HTTP gateway could not (EINVAL)."""
    done = serve_and_fail("--host", "::ffff:127.0.0.1")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "cardrules: error: --host: '::ffff:127.0.0.1' is an IPv4 address in IPv6 form: "
        "give 127.0.0.1\n"
    )


@pytest.mark.parametrize("host", ["0.0.0.0:8080", "localhost:50051", "1:2:3"])
def test_a_host_with_a_port_in_it_exits_2_pointing_at_the_port_flags(host):
    """Such a host passed as an IPv6 literal before, and the server exited 1 on a
    name it could not resolve ("[0.0.0.0:8080]:50051"), never naming ``--host``."""
    done = serve_and_fail("--host", host)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"cardrules: error: --host: {host!r} is not a host name or address (the ports "
        "have flags of their own: --grpc-port, --http-port, --metrics-port)\n"
    )


def test_the_deprecated_lower_case_metrics_folder_variable_still_works(tmp_path):
    """prometheus_client still switches to multiprocess mode on ``prometheus_multiproc_dir``;
    the server crashed at start (KeyError) reading only the upper-case name."""
    folder = tmp_path / "metrics"
    folder.mkdir()
    (folder / "counter_1.db").write_bytes(b"")  # an earlier run's values: emptied at start
    env = {"prometheus_multiproc_dir": str(folder)}
    with running(("--metrics-port", str(free_port())), env) as server:
        server.wait_for_logs("metrics")
        with connect(server.target) as stub:
            stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=30)
        found = metric_samples(server.metrics_url)
        assert not (folder / "counter_1.db").exists()
        assert any(path.name.startswith("counter_") for path in folder.glob("*.db"))
    game = {"game": "krypkasino", "players": "2", "teams": "individual", "variant": "default"}
    assert found[("cardrules_games_started_total", frozenset(game.items()))] == 1


def on_a_small_tmpfs(
    folder: Path, size: str, filled: Path | None = None, stale: str | None = None
) -> tuple[str, ...]:
    """A launcher that mounts a tmpfs of ``size`` on ``folder`` (made here) in a mount
    namespace of the server's own, then runs the server in it: a full filesystem
    without filling a real one.

    With ``filled``, something else fills the tmpfs once the server's four files of
    values (two workers) are there, and then creates ``filled`` (outside the tmpfs).
    With ``stale`` (a size for ``head -c``), an earlier run left a file of values of
    that size in ``values``.
    """
    folder.mkdir()
    script = 'mount -t tmpfs -o size="$1" tmpfs "$2" || exit 1\n'
    if stale is not None:
        script += f'mkdir "$2/values" && head -c {stale} /dev/zero > "$2/values/counter_1.db"\n'
    if filled is not None:
        script += (
            '(until [ "$(ls "$2"/values 2>/dev/null | grep -c "[.]db$")" -ge 4 ]; do sleep 0.05; done\n'
            ' cat /dev/zero > "$2/filler" 2>/dev/null; touch "$3") &\n'
        )
    script += 'shift 3\nexec "$@"\n'
    return in_mount_namespace(script, size, str(folder), str(filled))


def test_a_metrics_folder_without_room_for_the_workers_exits_2_with_one_line(tmp_path):
    """The values live in memory-mapped files that prometheus_client makes sparse: on a
    full filesystem both workers died of SIGBUS as they started (exit 1, `worker
    exited` with `signal` SIGBUS and nothing on the cause)."""
    folder = tmp_path / "metrics"
    command = [
        *on_a_small_tmpfs(folder, "64k"),
        CARDRULES,
        "serve",
        "--host",
        "127.0.0.1",
        *workers(),
        "--http-port",
        str(free_port()),
        "--metrics-port",
        "0",
    ]
    process = start_session(
        command,
        env=server_environment({"PROMETHEUS_MULTIPROC_DIR": str(folder / "values")}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=60)
    finally:
        kill_group(process)
    assert process.returncode == 2 and stdout == ""
    assert stderr.startswith("cardrules: error: --workers needs a writable folder")
    assert "No space left on device" in stderr or "no room for" in stderr
    assert "PROMETHEUS_MULTIPROC_DIR" in stderr and stderr.count("\n") == 1
    # docs/operations.md, "Workers": two files of 64 KiB for each of the two workers.
    assert f"no room for {2 * 2 * 64 * 1024} bytes" in stderr


@pytest.mark.parametrize(
    ("size", "stale"), [("384k", "256k"), ("320k", "128k")], ids=["all_of_it", "half_of_it"]
)
def test_the_room_an_earlier_runs_values_take_counts_as_free(tmp_path, size, stale):
    """They are deleted before the workers start: a folder with room for one run's
    values (an emptyDir sized for them, kept when the container restarts) stopped
    the next start with exit 2, no room. Two workers need 256 KiB: with 128 KiB of
    stale values, only the other 128 KiB must be free."""
    folder = tmp_path / "metrics"
    launcher = on_a_small_tmpfs(folder, size, stale=stale)
    env = {"PROMETHEUS_MULTIPROC_DIR": str(folder / "values")}
    with running((*workers(), "--metrics-port", "0"), env, launcher=launcher) as server:
        server.wait_for_logs("listening", 2)


# Rule flags a 4-player game takes in any combination, with the three removals: 192 variants.
FREE_FLAGS = (
    "last_capture_point",
    "no_forced_sweep",
    "court_cards_rank_only",
    "must_capture_if_able",
    "nordic_scoring",
    "bordstabbe",
)


def every_variant() -> list[pb.Rules]:
    """The 192 rules of ``FREE_FLAGS``: a new ``variant`` series each."""
    return [
        pb.Rules(
            removal=removal, **{flag: bool(mask >> bit & 1) for bit, flag in enumerate(FREE_FLAGS)}
        )
        for mask in range(1 << len(FREE_FLAGS))
        for removal in (pb.REMOVAL_COURTS, pb.REMOVAL_SPADES, pb.REMOVAL_NONE)
    ]


SEATINGS = (
    *((players, pb.TEAM_MODE_UNSPECIFIED) for players in range(2, 7)),
    (4, pb.TEAM_MODE_PAIRS),
    (6, pb.TEAM_MODE_PAIRS),
    (6, pb.TEAM_MODE_TRIOS),
)


def every_series() -> list[pb.GameConfig]:
    """256 configs, each a ``cardrules_games_started_total`` series of its own, new but
    for the default variant's (pre-created): the first ``MAX_NAMED_VARIANTS`` variants
    (a process names no more) in every seating."""
    return [
        pb.GameConfig(players=players, teams=teams, rules=rules)
        for players, teams in SEATINGS
        for rules in every_variant()[:MAX_NAMED_VARIANTS]
    ]


def test_a_metrics_folder_that_fills_up_loses_new_series_but_no_call_or_worker(tmp_path):
    """A new series (a variant never played before) takes room in a worker's file of
    values; once something else had filled the filesystem the worker died of SIGBUS
    mid-call, and the server exited 1. Now the game is started, the series made after
    the file's reserved room ran out are lost, and the worker says so once."""
    folder = tmp_path / "metrics"
    filled = tmp_path / "filled"
    launcher = on_a_small_tmpfs(folder, "1m", filled)
    env = {"PROMETHEUS_MULTIPROC_DIR": str(folder / "values")}
    configs = every_series()
    with running(
        (*workers(), "--metrics-port", str(free_port())),
        env,
        launcher=launcher,
        failures_expected=True,
    ) as server:
        server.wait_for_logs("listening", 2)
        server.wait_for_logs("metrics")
        deadline = time.monotonic() + 30
        while not filled.exists():
            assert time.monotonic() < deadline, "the tmpfs was never filled"
            time.sleep(0.05)
        with connect(server.target) as stub:  # one connection: one worker serves them all
            for config in configs:
                game = stub.NewGame(pb.NewGameRequest(config=config), timeout=30)
                assert len(game.seat_tokens) == config.players
        [lost] = server.wait_for_logs("metrics values lost")
        found = metric_samples(server.metrics_url)
    assert lost["level"] == "error" and lost["series"] == "cardrules_games_started_total"
    assert "No space left on device" in str(lost["error"])
    assert server.log_events("worker exited") == []
    started = {
        labels: value
        for (name, labels), value in found.items()
        if name == "cardrules_games_started_total"
    }
    # The series made before the folder was full are counted; the others are lost.
    assert 0 < len(started) < len(configs) and set(started.values()) == {1}
    handled_ok = sum(
        value
        for (name, labels), value in found.items()
        if name == "grpc_server_handled_total"
        and ("grpc_method", "NewGame") in labels
        and ("grpc_code", "OK") in labels
    )
    assert handled_ok == len(configs)


def test_new_series_made_while_no_descriptor_is_left_lose_no_call(tmp_path):
    """With the values in files (``PROMETHEUS_MULTIPROC_DIR``), a file that outgrows its
    map is mapped anew, which takes a descriptor. With none left the NewGame that made
    the series failed INTERNAL, and so did every later one that made a series, also once
    descriptors were back: prometheus_client had doubled the file's size before the map
    failed, and wrote past the end of the old map from then on (IndexError)."""
    folder = tmp_path / "metrics"
    launcher = ("sh", "-c", 'ulimit -n 64 && exec "$@"', "sh")
    env = {"PROMETHEUS_MULTIPROC_DIR": str(folder)}
    configs = every_series()
    with (
        running(
            ("--metrics-port", str(free_port())), env, launcher=launcher, failures_expected=True
        ) as server,
        connect(server.target) as stub,
    ):
        stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=30)
        hogs = []
        try:
            for _ in range(100):
                hogs.append(socket.create_connection(("127.0.0.1", server.http_port)))
            server.wait_for_logs("no file descriptors left: connections wait to be accepted")
            for config in configs[:-1]:
                game = stub.NewGame(pb.NewGameRequest(config=config), timeout=30)
                assert len(game.seat_tokens) == config.players
        finally:
            for hog in hogs:
                hog.close()
        [lost] = server.wait_for_logs("metrics values lost")
        # Descriptors are back: the next new series is counted again.
        last = configs[-1]
        stub.NewGame(pb.NewGameRequest(config=last), timeout=30)
        found = metric_samples(server.metrics_url)
    assert lost["level"] == "error" and "Too many open files" in str(lost["error"])
    assert not server.log_events("unhandled error")
    variant = variant_label(config_from_proto(last).rules.enabled())
    started = {
        dict(labels)["variant"]: value
        for (name, labels), value in found.items()
        if name == "cardrules_games_started_total"
        and {("players", "6"), ("teams", "trios")} <= labels
    }
    assert started[variant] == 1, sorted(started)


@pytest.mark.parametrize("pause", [3, 4])
def test_a_server_paused_whole_for_longer_than_the_worker_timeout_keeps_its_workers(pause):
    """A pause of every process at once (``docker pause``, a cgroup freeze, Ctrl-Z then
    ``fg``) stops the workers' beats and the supervisor's watch alike: on resuming, the
    watch must not take the silence it did not see for hung workers and kill them all.
    docs/operations.md says so of any pause: also one of 3 s, longer than the timeout
    of 2 s but shorter than twice it."""
    with running((*workers(), "--worker-timeout-seconds", "2")) as server:
        server.wait_for_logs("listening", 2)
        os.killpg(server.process.pid, signal.SIGSTOP)
        time.sleep(pause)
        os.killpg(server.process.pid, signal.SIGCONT)
        time.sleep(3)  # longer than the timeout: a worker that did not beat is killed by now
        assert server.process.poll() is None, server.logs
        with connect(server.target) as stub:
            stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=30)
        assert server.terminate() == 0
    assert not server.log_events("worker hung")


def test_a_temporary_metrics_folder_left_without_its_lock_is_removed_once_old(tmp_path):
    """A server killed between making its folder and naming its lock (``_hold``) left a
    folder that no start removed, having no lock to test: now one that has had none for
    ``UNLOCKED_FOLDER_SECONDS`` is removed, and one just made is not (its server may be
    about to name its lock)."""
    old, new = tmp_path / f"{TEMPORARY_PREFIX}old", tmp_path / f"{TEMPORARY_PREFIX}new"
    for folder in (old, new):
        folder.mkdir()
        (folder / ".in-use.new").touch()
    long_ago = time.time() - UNLOCKED_FOLDER_SECONDS - 5
    os.utime(old, (long_ago, long_ago))
    (tmp_path / f"{TEMPORARY_PREFIX}file").touch()  # not a folder: not touched either
    os.utime(tmp_path / f"{TEMPORARY_PREFIX}file", (long_ago, long_ago))
    remove_abandoned_folders(str(tmp_path))
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        f"{TEMPORARY_PREFIX}file",
        f"{TEMPORARY_PREFIX}new",
    ]


def test_two_servers_with_workers_on_different_ports_and_metrics_off_both_serve():
    """Only the ports workers share are claimed: metrics off (port 0) is no port, and two
    unrelated servers with workers on one machine must not refuse each other over it (a
    mutation review: claiming the metrics port too went unnoticed)."""
    workers = ("--workers", "2", "--metrics-port", "0")
    first = (*workers, "--grpc-port", str(free_port()))
    second = (*workers, "--grpc-port", str(free_port()))
    with running(first) as one, running(second) as other:
        one.wait_for_logs("listening", 2)
        other.wait_for_logs("listening", 2)
