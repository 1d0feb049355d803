"""The soak benchmark still runs end to end and counts what it should (real servers; its
timings and memory growth are never asserted: shared machines are noisy)."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf.message import Message

from bench import procfs, soak, soak_traffic
from bench.__main__ import build_parser
from bench.common import Json
from bench.server import BENCH_KEY, cardrules_serve, cardrules_server
from bench.soak_traffic import (
    EXPECTED_CODES,
    GET_VIEW,
    LEGAL_MOVES,
    NEW_GAME,
    PLAY,
    SCORE,
    CallError,
    GrpcTransport,
    HttpTransport,
    Player,
    ResponseT,
    Rpc,
    Tally,
    Transport,
    play_until,
)
from tests.service.grpc_helpers import game_state, seal

# One deal of two players on one deck: about fifty turns.
SHORT_MATCH = pb.GameConfig(
    players=2, rules=pb.Rules(single_deck=True), match_deals=1, target_score=20
)


def test_quick_soak_plays_whole_matches_over_both_transports(tmp_path: Path) -> None:
    """Two workers, so that the sampler finds the supervisor's children through /proc."""
    out = tmp_path / "soak.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "soak", "--quick", "--workers", "2", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "per hour after warm-up" in done.stdout
    assert "  soak 0:0" in done.stderr  # a progress line per sample
    report = json.loads(out.read_text())
    tally = report["tally"]
    assert tally["failures"] == {}
    assert tally["games"]["grpc"] > 0 and tally["games"]["http"] > 0, tally
    assert tally["calls"]["grpc"] > tally["games"]["grpc"], tally
    assert tally["calls"]["http"] > tally["games"]["http"], tally
    assert set(tally["refusals"]) <= set(EXPECTED_CODES)
    samples = report["samples"]
    assert len(samples) >= 4
    for taken in samples:
        roles = [process["role"] for process in taken["processes"]]
        assert roles == ["main", "worker", "worker"], taken
        for process in taken["processes"]:
            assert 0 < process["rss_kib"] <= process["hwm_kib"], process
            assert process["fds"] > 0 and process["threads"] > 0, process
        assert taken["rss_kib"] == sum(p["rss_kib"] for p in taken["processes"])
    assert [s["calls"] for s in samples] == sorted(s["calls"] for s in samples)
    summary = report["summary"]
    assert summary["failures"] == 0 and summary["samples"] == len(samples)
    assert summary["games"] == tally["games"]["grpc"] + tally["games"]["http"]
    # The calls after the last sample count too: the total once disagreed with its split.
    total = tally["calls"]["grpc"] + tally["calls"]["http"]
    assert summary["calls"] == total >= samples[-1]["calls"] > 0
    for metric in soak.METRICS:
        figures = summary["footprint"][metric]
        assert figures["end"] == samples[-1][metric] and figures["per_hour"] is not None
        assert figures["per_hour_last_quarter"] is not None
        assert figures["max"] == max(s[metric] for s in samples)
    assert 0 < summary["warmup_seconds"] < summary["end_seconds"]


@pytest.mark.parametrize("transport_name", ["grpc", "http"])
def test_each_bad_request_is_refused_with_its_expected_code(transport_name: str) -> None:
    """A refusal counts as expected only with its kind's code; a wrong code would be a
    failure, so each kind is checked against the real service over each transport."""

    async def main(ports: tuple[int, int]) -> Tally:
        player = _player(transport_name, ports)
        started = await player.transport.call(NEW_GAME, pb.NewGameRequest(config=SHORT_MATCH))
        state, tokens, view = started.state, list(started.seat_tokens), started.view
        move = pb.Move()
        while not view.game_over:
            seat = view.turn
            legal = await player.transport.call(
                LEGAL_MOVES, pb.LegalMovesRequest(state=state, seat=seat, seat_token=tokens[seat])
            )
            move = legal.moves[0].move
            if view.move_number == 3:  # a table with cards on it
                for kind in EXPECTED_CODES:
                    if kind != "after_game_over":
                        await player.bad_request(kind, state, tokens, view, move)
            play = pb.PlayRequest(state=state, seat=seat, seat_token=tokens[seat], move=move)
            played = await player.transport.call(PLAY, play)
            state, view = played.state, played.view
        await player.bad_request("after_game_over", state, tokens, view, move)
        await player.transport.close()
        return player.tally

    with cardrules_serve() as ports:
        tally = asyncio.run(main((ports.grpc, ports.http)))
    assert tally.failures == {}
    assert tally.refusals == dict.fromkeys(EXPECTED_CODES, 1)


@pytest.mark.parametrize("transport_name", ["grpc", "http"])
def test_refused_good_requests_and_accepted_bad_ones_are_failures(transport_name: str) -> None:
    async def main(ports: tuple[int, int]) -> Tally:
        player = _player(transport_name, ports)
        # A good request the service refuses (no state token): a failure, no answer.
        assert await player.call(LEGAL_MOVES, pb.LegalMovesRequest(seat=0)) is None
        started = await player.transport.call(NEW_GAME, pb.NewGameRequest(config=SHORT_MATCH))
        # A "bad" request the service answers: a failure too.
        await player.refused("tampered_state", GET_VIEW, pb.GetViewRequest(state=started.state))
        # Refused, but with another code than the kind's.
        await player.refused("not_your_turn", LEGAL_MOVES, pb.LegalMovesRequest(seat=0))
        await player.transport.close()
        return player.tally

    with cardrules_serve() as ports:
        tally = asyncio.run(main((ports.grpc, ports.http)))
    assert sorted(tally.failures) == [
        f"{transport_name} get_view tampered_state: accepted",
        f"{transport_name} legal_moves INVALID_ARGUMENT STATE_MISSING",
        f"{transport_name} legal_moves not_your_turn: INVALID_ARGUMENT STATE_MISSING",
    ]
    assert tally.refusals == {}


@dataclass
class Recorded:
    """A transport that keeps every request it sends (the RPC and the message) and
    sends it on."""

    transport: Transport
    sent: list[tuple[str, Message]] = field(default_factory=list)
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.transport.name

    async def call(self, rpc: Rpc[ResponseT], request: Message) -> ResponseT:
        self.sent.append((rpc.method, request))
        return await self.transport.call(rpc, request)

    async def close(self) -> None:
        await self.transport.close()


def test_a_server_that_never_answers_is_a_transport_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A connection accepted and never answered ends at the HTTP client's timeout, counted
    as a failure (here half a second instead of ten)."""
    monkeypatch.setattr(soak_traffic, "HTTP_TIMEOUT_SECONDS", 0.5)

    async def main(port: int) -> Tally:
        player = _player("http", (port, port))
        assert await player.call(NEW_GAME, pb.NewGameRequest(config=SHORT_MATCH)) is None
        await player.transport.close()
        return player.tally

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # the kernel accepts; nothing ever reads or answers
        tally = asyncio.run(main(silent.getsockname()[1]))
    assert tally.failures == {"http new_game TRANSPORT TimeoutError": 1}


class ScoreRefused(Recorded):
    """A transport whose every Score fails as a lost connection would."""

    async def call(self, rpc: Rpc[ResponseT], request: Message) -> ResponseT:
        if rpc is SCORE:
            raise CallError("UNAVAILABLE", "no ErrorInfo")
        return await super().call(rpc, request)


def test_a_match_whose_score_failed_is_not_counted_as_played(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its last Score, the only one: none at the deal's end."""
    monkeypatch.setattr(soak_traffic, "SCORE_SHARE", 0.0)

    async def main(port: int) -> Tally:
        player = Player(
            ScoreRefused(GrpcTransport(port)),
            random.Random(0),
            Tally(),
            time.monotonic() + 60,
            True,
        )
        await player.play_match()
        await player.transport.close()
        return player.tally

    with cardrules_serve() as ports:
        tally = asyncio.run(main(ports.grpc))
    assert tally.games == {} and set(tally.failures) == {"grpc score UNAVAILABLE no ErrorInfo"}


def test_an_unreachable_server_is_a_transport_failure() -> None:
    async def main(port: int) -> Tally:
        player = _player("http", (port, port))
        assert await player.call(NEW_GAME, pb.NewGameRequest(config=SHORT_MATCH)) is None
        await player.transport.close()
        return player.tally

    with cardrules_serve() as ports:
        free = ports.http  # taken by the server until it stops
    tally = asyncio.run(main(free))
    assert list(tally.failures) == ["http new_game TRANSPORT ClientConnectorError"]


def test_attempts_the_grpc_clients_retried_are_counted_from_the_servers_log() -> None:
    """The clients' retry policy hides a failed attempt from the tally; the server's request
    lines show it. A token sealed by a newer release is UNAVAILABLE on every attempt: the
    client makes four, three of them retries."""

    async def main(port: int) -> None:
        transport = GrpcTransport(port)
        started = await transport.call(NEW_GAME, pb.NewGameRequest(config=SHORT_MATCH))
        payload = game_state(started.state, BENCH_KEY).SerializeToString()
        newer = pb.GetViewRequest(state=seal(payload, BENCH_KEY, version=2))
        with pytest.raises(CallError, match="UNAVAILABLE"):
            await transport.call(GET_VIEW, newer)
        await transport.close()

    with cardrules_server() as server:
        assert soak.retried_attempts(server.log_path) == 0
        asyncio.run(main(server.ports.grpc))
        deadline = time.monotonic() + 10
        while soak.retried_attempts(server.log_path) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)  # the last line may still be on its way to the file
        assert soak.retried_attempts(server.log_path) == 3
        tally = Tally()
        soak.count_retries(tally, server.log_path)
        assert tally.failures == {soak.RETRIED: 3}


def test_retried_attempts_are_the_lines_with_an_attempt_field(tmp_path: Path) -> None:
    """Only the field counts: a request id is the caller's text and may say "attempt"."""
    log = tmp_path / "server.log"
    lines = [
        '{"event":"listening","grpc_port":1}',
        '{"event":"request","request_id":"attempt","code":"OK"}',
        *(f'{{"event":"request","request_id":"r","attempt":{n}}}' for n in (2, 3, 4, 5)),
    ]
    log.write_text("\n".join(lines) + "\n")
    assert soak.retried_attempts(log) == 4
    for retries in (0, 1):
        log.write_text("\n".join(lines[: 2 + retries]) + "\n")
        tally = Tally()
        soak.count_retries(tally, log)
        assert tally.failures == ({soak.RETRIED: 1} if retries else {})


#: A parent whose thread other than the main one, still running, forks a shell that
#: forks ``sleep``; it prints both pids and ends them when its stdin closes.
FORKS_FROM_A_THREAD = """
import os, signal, subprocess, sys, threading

def spawn():
    shell = subprocess.Popen(
        ["sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE, text=True
    )
    sleeper = int(shell.stdout.readline())
    print(shell.pid, sleeper, flush=True)
    sys.stdin.read()
    os.kill(sleeper, signal.SIGKILL)
    shell.wait()

thread = threading.Thread(target=spawn)
thread.start()
thread.join()
"""


def test_procfs_finds_forked_children_and_forgets_ended_processes() -> None:
    """Every descendant, however deep, whichever thread forked it (soak's footprint sums
    the server's workers and theirs)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", FORKS_FROM_A_THREAD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None and parent.stdin is not None
        child, grandchild = map(int, parent.stdout.readline().split())
        assert procfs.descendants(parent.pid) == [child, grandchild]
        figures = procfs.footprint(parent.pid)
        assert figures is not None and figures.pid == parent.pid
        assert 0 < figures.rss_kib <= figures.hwm_kib and figures.threads >= 1
        assert figures.fds >= 3  # stdin, stdout and stderr at least
        parent.stdin.close()
        deadline = time.monotonic() + 30
        while procfs.footprint(parent.pid) is not None and time.monotonic() < deadline:
            time.sleep(0.05)  # an ended, unreaped process (a zombie) counts as gone
        assert procfs.footprint(parent.pid) is None
    finally:
        parent.kill()
        parent.wait()
    assert procfs.footprint(parent.pid) is None and procfs.descendants(parent.pid) == []


def test_procfs_finds_descendants_by_their_parent_pid_in_every_stat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Children are found by field 4 of each ``/proc/<pid>/stat``, read past a command name
    holding ``") "``; a process gone since the listing is skipped. The kernel documents
    ``/proc/PID/task/TID/children`` as reliable only for stopped children, and this folder
    shaped as ``/proc`` has none: the tree must come from the parent pids alone."""
    tree = {10: (1, "cardrules"), 12: (10, "a) b"), 11: (10, "w"), 40: (12, "sh"), 13: (11, "x")}
    tree[99] = (1, "other")
    for pid, (parent, name) in tree.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} ({name}) S {parent} {pid} {pid} 0 -1\n")
    (tmp_path / "50").mkdir()  # ended between the listing and the read: no stat left
    (tmp_path / "sys").mkdir()
    monkeypatch.setattr(procfs, "PROC", tmp_path)
    assert procfs.descendants(10) == [11, 12, 13, 40]
    assert procfs.descendants(12) == [40] and procfs.descendants(99) == []


MATCHES = 12


def test_a_soak_client_sends_the_documented_mix_and_counts_each_answer() -> None:
    """Seeded one-deal matches over gRPC (docs/benchmarks.md, "Soak"): a seat's view and
    the public one, every kind of bad request refused as expected, Score at most at the
    deal's end and the match's, and each request answered as expected counted once."""

    async def main(port: int) -> tuple[Player, Recorded]:
        recorded = Recorded(GrpcTransport(port))
        player = Player(recorded, random.Random(1), Tally(), time.monotonic() + 3600, True)
        for _ in range(MATCHES):
            await player.play_match()
        await recorded.close()
        return player, recorded

    with cardrules_serve() as ports:
        player, recorded = asyncio.run(main(ports.grpc))
    tally = player.tally
    assert tally.failures == {} and tally.games == {"grpc": MATCHES}
    assert tally.refusals.keys() == EXPECTED_CODES.keys(), tally.refusals
    assert tally.calls == {"grpc": len(recorded.sent)}
    views = [request for _, request in recorded.sent if isinstance(request, pb.GetViewRequest)]
    assert {bool(view.seat_token) for view in views} == {False, True}
    scores = sum(method == SCORE.method for method, _ in recorded.sent)
    assert MATCHES <= scores <= 2 * MATCHES


def test_play_until_starts_each_transports_clients_on_connections_of_their_own() -> None:
    """Three gRPC clients and one HTTP one: as many peers in the server's request lines."""

    async def main(ports: tuple[int, int]) -> Tally:
        tally, players = await play_until(ports, (3, 1), 0, time.monotonic() + 1.5, True)
        await asyncio.gather(*players)
        return tally

    with cardrules_server() as server:
        tally = asyncio.run(main((server.ports.grpc, server.ports.http)))
        lines = [json.loads(line) for line in server.log_path.read_text().splitlines()]
    assert tally.failures == {} and tally.calls.keys() == {"grpc", "http"}
    peers: dict[str, set[str]] = {"grpc": set(), "http": set()}
    for line in lines:
        if line.get("event") == "request":
            peers[line["transport"]].add(line["peer"])
    assert {name: len(found) for name, found in peers.items()} == {"grpc": 3, "http": 1}


#: A parent that sleeps while its child burns CPU for a moment and then sleeps too; it
#: prints the child's pid once the child has burned, and ends it when its stdin closes.
BUSY_CHILD = """
import subprocess, sys
child = subprocess.Popen(
    [sys.executable, "-c", "import time\\nend = time.process_time() + 0.3\\n"
     "while time.process_time() < end: pass\\nprint(flush=True)\\ntime.sleep(60)"],
    stdout=subprocess.PIPE,
)
child.stdout.readline()
print(child.pid, flush=True)
sys.stdin.read()
child.kill()
child.wait()
"""


def test_a_sample_sums_every_server_process_and_both_transports() -> None:
    """The footprint and CPU time of the supervisor and each worker, the calls of both
    transports, the failures of every kind."""
    parent = subprocess.Popen(
        [sys.executable, "-c", BUSY_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert parent.stdout is not None and parent.stdin is not None
        child = int(parent.stdout.readline())
        tally = Tally()
        tally.calls.update({"grpc": 5, "http": 7})
        tally.games.update({"grpc": 1, "http": 2})
        tally.refusals.update({"tampered_state": 1, "not_your_turn": 3})
        tally.failures.update({"grpc play INTERNAL x": 2, "http play TRANSPORT y": 1})
        taken = soak.sample(parent.pid, tally, 1.5)
        parent.stdin.close()
    finally:
        parent.kill()
        parent.wait()
    assert [p["pid"] for p in taken["processes"]] == [parent.pid, child]
    assert [p["role"] for p in taken["processes"]] == ["main", "worker"]
    assert (taken["seconds"], taken["calls"], taken["games"]) == (1.5, 12, 3)
    assert (taken["refusals"], taken["failures"]) == (4, 3)
    processes = taken["processes"]
    assert taken["cpu_seconds"] == round(sum(p["cpu_seconds"] for p in processes), 2)
    assert processes[1]["cpu_seconds"] >= 0.3  # the child's time is in the sum
    for metric in soak.METRICS:
        assert taken[metric] == sum(p[metric] for p in processes), metric


def test_a_soak_whose_server_exited_stops_at_its_first_sample() -> None:
    """It says how the server stopped, and samples it no more."""
    params: Json = {"grpc_clients": 1, "http_clients": 1, "seed": 0, "one_deal": True}
    params |= {"seconds": 3.0, "sample_seconds": 0.5}
    with cardrules_server() as server:
        server.process.kill()
        server.process.wait()
        samples, tally, stopped = asyncio.run(soak.soak(server, params))
    assert stopped == "the server exited with status -9"
    assert len(samples) == 1 and samples[0]["processes"] == []
    assert tally.calls == {} and tally.failures  # every call found the server gone


def _player(transport_name: str, ports: tuple[int, int]) -> Player:
    """A player on one connection of its own; made in the running loop, as the clients need."""
    transport: Transport = (
        GrpcTransport(ports[0]) if transport_name == "grpc" else HttpTransport(ports[1])
    )
    return Player(transport, random.Random(0), Tally(), time.monotonic() + 60, one_deal=True)


@pytest.mark.parametrize("option", ["--minutes", "--sample-seconds"])
@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_soak_refuses_a_duration_that_is_no_positive_number(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        build_parser().parse_args(["soak", option, value])
    assert refused.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python -m bench soak: error: argument {option}: must be a number above 0, not {value}"
    )
