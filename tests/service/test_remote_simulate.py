"""Seeded games over gRPC give exactly the in-process transcript."""

from __future__ import annotations

import contextlib
import io
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from engine.cards import full_deck
from engine.krypkasino import Config, Removal, Rules, Teams, TieRule
from service import cli, remote_simulate
from service.calls import CallInfo
from service.cli import build_parser
from service.config import ServerConfig
from service.descriptors import snake_case
from service.krypkasino_api import SERVICE_DESCRIPTOR, SERVICE_NAME
from service.remote_simulate import RemoteError, RemoteTable
from service.server import build_api
from service.simulate import GameRecord, SimulationRequest, play_game, transcript
from service.tokens import KeyRing
from service.transcript import dump_document, render_text
from tests.service.server_process import CARDRULES, TEST_KEY, running
from tests.service.simulate_process import simulate_command


# A tie-break deal (K13.3) between seats 2 and 5, which seat 5 wins on 7 while seat 0 has -8.
def play_remote_game(request: SimulationRequest, target: str, **options: Any) -> GameRecord:
    """One match through a channel of its own, as ``simulate --server --games 1`` plays it."""
    with RemoteTable(target) as table:
        return table.play(request, **options)


TIEBREAK_REQUEST = SimulationRequest(
    Config(players=6, target_score=1, tie_rule=TieRule.TIEBREAK_DEAL), seed=211
)
REQUESTS = [
    SimulationRequest(Config(players=2), seed=11),
    # The last seed, of 20 digits: NewGame's whole uint64 (a mutation review found the
    # seed cut to 63 bits passed).
    SimulationRequest(Config(players=2), seed=2**64 - 1),
    SimulationRequest(Config(players=4, teams=Teams.PAIRS), seed=5, policy="greedy"),
    SimulationRequest(
        Config(players=3, draw_for_deal=True, target_score=25, tie_rule=TieRule.TIEBREAK_DEAL),
        seed=9,
    ),
    SimulationRequest(
        Config(players=5, rules=Rules(four_four=True, bordstabbe=True, last_capture_point=True)),
        seed=2,
        policy="greedy",
    ),
    SimulationRequest(
        Config(
            players=6,
            teams=Teams.TRIOS,
            rules=Rules(removal=Removal.SPADES, court_cards_rank_only=True),
            match_deals=6,
        ),
        seed=4,
    ),
    TIEBREAK_REQUEST,
    SimulationRequest(  # the first deal from an explicit deck, reversed, the next shuffled
        Config(players=2, rules=Rules(single_deck=True)),
        seed=6,
        decks=(tuple(reversed(full_deck(1))),),
    ),
]


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: f"{r.config.players}p-{r.seed}")
def test_remote_transcript_equals_in_process(grpc_target, request_):
    local = transcript(play_game(request_))
    remote = transcript(play_remote_game(request_, grpc_target))
    assert remote == local
    assert len(remote["turns"]) > 0


def test_a_tie_break_through_a_server_reads_as_in_process(grpc_target):
    """Through ``--server`` the tie-break teams come from Score, in-process from the
    state: both transcripts say the tied seats decided the win (K13.3)."""
    remote = transcript(play_remote_game(TIEBREAK_REQUEST, grpc_target))
    assert remote["result"]["tiebreak_teams"] == [2, 5]
    (ended,) = [e for t in remote["turns"] for e in t["events"] if e["type"] == "match_ended"]
    assert ended["tiebreak_teams"] == [2, 5]
    text = render_text(remote)
    assert text == render_text(transcript(play_game(TIEBREAK_REQUEST)))
    assert "(lowest total of the tied seat 2, seat 5 after the tie-break deal, K13.3)" in text


@contextlib.contextmanager
def api_server(before: Callable[[str, grpc.ServicerContext], None]) -> Iterator[str]:
    """An in-process server of the real API that calls ``before(method, context)`` ahead
    of serving each call (to refuse it, or hold it); it yields its address."""
    api = build_api(ServerConfig(), KeyRing.parse(TEST_KEY), None)

    def handler(name: str) -> grpc.RpcMethodHandler[Any, Any]:
        serve = getattr(api, snake_case(name))

        def handle(request: Message, context: grpc.ServicerContext) -> Message:
            before(name, context)
            response: Message = serve(request, CallInfo())
            return response

        request_class = GetMessageClass(SERVICE_DESCRIPTOR.methods_by_name[name].input_type)
        return grpc.unary_unary_rpc_method_handler(
            handle,
            request_deserializer=request_class.FromString,
            response_serializer=lambda response: response.SerializeToString(),
        )

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    methods = {method.name: handler(method.name) for method in SERVICE_DESCRIPTOR.methods}
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE_NAME, methods)])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(None)


@contextlib.contextmanager
def refusing_each_method_once() -> Iterator[str]:
    """``api_server`` answering each method's first call with ``UNAVAILABLE``, as a
    replica going away does."""
    refused: set[str] = set()

    def refuse_first(name: str, context: grpc.ServicerContext) -> None:
        if name not in refused:
            refused.add(name)
            context.abort(grpc.StatusCode.UNAVAILABLE, "going away")

    with api_server(refuse_first) as target:
        yield target
    assert refused >= {"NewGame", "LegalMoves", "Play", "Score"}


def test_a_call_answered_unavailable_is_retried_as_the_client_retries_it():
    """``--server`` plays through a channel with the client's retry policy, so a
    replica going away (or restarting) does not end the run."""
    request = REQUESTS[0]
    with refusing_each_method_once() as target:
        remote = transcript(play_remote_game(request, target))
    assert remote == transcript(play_game(request))


def test_cli_server_flag_prints_the_in_process_document(grpc_target):
    args = ["simulate", "krypkasino", "--players", "4", "--seed", "21", "--json"]
    local = subprocess.run([CARDRULES, *args], capture_output=True, text=True, check=True)
    remote = subprocess.run(
        [CARDRULES, *args, "--server", grpc_target], capture_output=True, text=True, check=True
    )
    assert remote.stdout == local.stdout
    request = SimulationRequest(Config(players=4), seed=21)
    assert local.stdout == dump_document(transcript(play_game(request)))
    assert remote.stderr == local.stderr == ""  # no bar where stderr is no terminal


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_one_game_through_a_server_shows_its_deals_on_a_terminal(grpc_target, monkeypatch):
    """A long match takes minutes through a server: a bar of its deals shows it going."""
    argv = ["simulate", "krypkasino", "--players", "3", "--deals", "6", "--seed", "3"]
    outputs = []
    for server in ((), ("--server", grpc_target)):
        stdout, stderr = io.StringIO(), _Terminal()
        monkeypatch.setattr(sys, "stdout", stdout)
        monkeypatch.setattr(sys, "stderr", stderr)
        assert cli.main([*argv, *server]) == 0
        outputs.append((stdout.getvalue(), stderr.getvalue()))
    (local, no_bar), (remote, bar) = outputs
    assert remote == local
    assert no_bar == ""  # in-process a match takes seconds
    assert "/6 [" in bar and "deal/s" in bar, bar


def test_progress_hears_of_every_move_with_the_deals_finished(grpc_target):
    """The bar of ``--server``'s deals counts finished deals: it counted the deal in play,
    and so stood at 6/6, 100 %, through the whole of the last deal."""
    request = SimulationRequest(Config(players=3, match_deals=6), seed=3)
    deals: list[int] = []
    record = play_remote_game(request, grpc_target, progress=deals.append)
    assert len(deals) == record.moves
    assert deals == sorted(deals) and set(deals) == set(range(7))
    # The deals before the next move's: a deal ends with its last move.
    assert deals == [turn.deal - 1 for turn in record.turns[1:]] + [6]
    assert deals.count(6) == 1  # only once the match is over


def test_unreachable_server_is_one_line_and_status_1():
    with pytest.raises(RemoteError, match="UNAVAILABLE") as raised:
        play_remote_game(SimulationRequest(Config(players=2)), "127.0.0.1:1")
    assert not raised.value.started  # NewGame, the first call, failed
    done = subprocess.run(
        [CARDRULES, "simulate", "krypkasino", "--players", "2", "--server", "127.0.0.1:1"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    # The seed, to play it again once the server is back; not "finished": none started.
    assert done.stderr.endswith("; the game of seed 0 was not started\n")


def test_an_unreachable_server_before_any_game_of_many_prints_no_summary():
    done = subprocess.run(
        simulate_command(
            "--players", "2", "--games", "3", "--seed", "8", "--server", "127.0.0.1:1"
        ),
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (1, "")
    *progress, line = done.stderr.splitlines()
    assert progress == ["simulate:   0% 0/3 [00:00<?, ?game/s]"]
    assert line.startswith("cardrules: error: 127.0.0.1:1: UNAVAILABLE: ")
    assert line.endswith("; stopped before the first of 3 games (seed 8) was started: no summary")


CHOSEN_DEALS_REFUSED = (
    "the server refuses chosen deals (--refuse-chosen-deals), and simulate deals every "
    "game by its seed: use a server without that flag, or play in-process (no --server)"
)


def test_a_server_that_refuses_chosen_deals_is_said_to_and_no_game_started():
    """simulate sends a seed whether the user gave one or not: the server's own words
    ("seed: ...") read as a seed given wrongly, and no flag of simulate helps (a review)."""
    with running(("--refuse-chosen-deals",)) as server:
        with pytest.raises(RemoteError) as raised:
            play_remote_game(SimulationRequest(Config(players=2)), server.target)
        one = subprocess.run(
            [CARDRULES, "simulate", "krypkasino", "--players", "2", "--server", server.target],
            capture_output=True,
            text=True,
        )
        many = subprocess.run(
            simulate_command("--players", "2", "--games", "3", "--server", server.target),
            capture_output=True,
            text=True,
        )
    assert str(raised.value) == f"{server.target}: {CHOSEN_DEALS_REFUSED}"
    assert not raised.value.started
    ends = {
        id(one): "; the game of seed 0 was not started",
        id(many): "; stopped before the first of 3 games (seed 0) was started: no summary",
    }
    for done in (one, many):
        assert (done.returncode, done.stdout) == (1, "")
        line = done.stderr.splitlines()[-1]
        assert line.startswith(f"cardrules: error: {server.target}: {CHOSEN_DEALS_REFUSED}; ")
        assert line.endswith(ends[id(done)]), "not 'finished' or 'over': no game started"
        assert "INVALID_ARGUMENT" not in line


def test_a_call_refused_after_new_game_says_the_game_started(capsys):
    """Only a failed ``NewGame`` leaves no game started."""

    def refuse_play(name: str, context: grpc.ServicerContext) -> None:
        if name == "Play":
            context.abort(grpc.StatusCode.INTERNAL, "broken")

    simulate = ["simulate", "krypkasino", "--players", "2"]
    with api_server(refuse_play) as target:
        with pytest.raises(RemoteError) as raised:
            play_remote_game(REQUESTS[0], target)
        one = cli.main([*simulate, "--server", target]), capsys.readouterr().err
        many = cli.main([*simulate, "--games", "3", "--server", target]), capsys.readouterr().err
    assert str(raised.value) == f"{target}: INTERNAL: broken"
    assert raised.value.started
    assert one[0] == 1 and one[1].endswith("; the game of seed 0 was not finished\n")
    assert many[0] == 1 and many[1].endswith(
        "; stopped before the first of 3 games (seed 0) was over: no summary\n"
    )


@pytest.mark.parametrize("method", ["GetView", "LegalMoves", "Play", "Score"])
def test_a_call_the_server_never_answers_ends_the_game_at_the_deadline(
    method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every call of a game has the deadline NewGame has (10 s; cut to 0.5 s here): a
    server that stalls mid-game ends the run with status 1, not never."""
    monkeypatch.setattr(remote_simulate, "DEADLINE_SECONDS", 0.5)
    release = threading.Event()
    stalled: list[str] = []

    def stall(name: str, context: grpc.ServicerContext) -> None:
        # Its first call only, and for 5 s: without a deadline the game would go on.
        if name == method and not stalled:
            stalled.append(name)
            release.wait(5)

    with api_server(stall) as target:
        try:
            with pytest.raises(RemoteError) as raised:
                play_remote_game(REQUESTS[0], target)
        finally:
            release.set()
    assert str(raised.value).startswith(f"{target}: DEADLINE_EXCEEDED: ")
    assert raised.value.started


def test_the_http_gateways_port_given_for_the_grpc_one_is_said_so(server):
    """grpc's own words ("Trying to connect an http1.x server") left a newcomer guessing."""
    with pytest.raises(RemoteError, match=r"--server takes the gRPC port, not the gateway's"):
        play_remote_game(SimulationRequest(Config(players=2)), f"127.0.0.1:{server.http_port}")


def test_a_failure_whose_text_spans_lines_is_still_one_line(capsys):
    """service/cli.py: errors are one line on stderr. gRPC's own text may hold the
    address as given, line break and all: a socket's path may hold one."""
    server = "unix:/nonexistent/no\nsuch.sock"
    status = cli.main(["simulate", "krypkasino", "--players", "2", "--server", server])
    err = capsys.readouterr().err
    assert status == 1
    assert err.count("\n") == 1
    assert err.startswith("cardrules: error: unix:/nonexistent/no such.sock: UNAVAILABLE")


@pytest.mark.parametrize(
    ("address", "complaint"),
    [
        ("", "the target is empty: give host:port"),
        ("  ", "empty"),
        ("localhost:99999", "65535"),
        # grpc would take port 443 and fail to connect, far from the mistake
        ("localhost", "'localhost' has no port: give HOST:PORT, e.g. localhost:50051"),
        ("[::1]", "has no port"),
        ("localhost:", "has an empty port"),
        ("dns:///localhost", "has no port"),
        ("dns:localhost", "has no port"),
        # two slashes: grpc reads the host as a DNS server's and would fail every call
        ("dns://localhost:50051", "names no address: give dns:///HOST:PORT"),
        # a port, then a slash: not "no port"
        ("localhost:50051/", "ends its address with '/'"),
        # an IPv6 address without brackets has no port: its last group is not one
        ("::1", "'::1' has no port"),
        # not the client library's advice on TLS credentials: simulate has none
        ("http://localhost:8080", "is a URL: give the gRPC host:port, such as localhost:50051"),
        ("HTTPS://x:443", "simulate connects without TLS)"),
        # any URL, not the client library's word on TLS credentials, nor a host name
        # lookup that failed at the first call (exit 1)
        ("grpc://localhost:50051", "is a URL: give the gRPC host:port"),
        ("grpcs://x:443", "simulate connects without TLS)"),
        ("ws://host:1", "'ws://host:1' is a URL: give the gRPC host:port"),
        # the client's own checks (cardrules.client.channel.check_target)
        ("ipv4:127.0.0.1:50051,127.0.0.1:70000", "not 70000"),
        ("local\nhost:1", "the host in target 'local\\nhost:1' holds white space"),
    ],
)
def test_a_blank_portless_out_of_range_or_malformed_server_address_is_bad_input(address, complaint):
    done = subprocess.run(
        [CARDRULES, "simulate", "krypkasino", "--players", "2", "--server", address],
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert complaint in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "address",
    [
        "localhost:50051",
        "[::1]:50051",
        "localhost:http",  # a named port
        "dns:///localhost:50051",
        "DNS:///localhost:50051",
        "unix-abstract:cardrules",
        "xds:///cardrules",
        "ipv4:127.0.0.1:50051,127.0.0.1:50052",
        "ipv6:[::1]:50051",
        # a socket names no port
        "unix:cardrules.sock",
        "unix:///run/cardrules/grpc:0",
        # a socket's name that reads as a state key (43 letters of base64) is a name
        "unix:///run/cardrules/abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
        "unix-abstract:abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
    ],
)
def test_every_target_form_with_a_port_or_a_socket_is_taken(address):
    args = ["simulate", "krypkasino", "--players", "2", "--server", address]
    assert build_parser().parse_args(args).server == address


def test_a_summary_through_the_server_says_no_invariant_was_checked(grpc_target):
    """The text summary says where the games ran: its last line names ``--server``, not
    in-process, and its invariant line that none were checked (only in-process can)."""
    args = ["simulate", "krypkasino", "--players", "2", "--games", "2", "--server", grpc_target]
    as_json = subprocess.run([CARDRULES, *args, "--json"], capture_output=True, text=True)
    as_text = subprocess.run([CARDRULES, *args], capture_output=True, text=True)
    assert (as_json.returncode, as_text.returncode) == (0, 0)
    summary = json.loads(as_json.stdout)
    assert summary["invariant_checks"] is None and summary["turns"] > 0
    assert "invariant checks: not run" in as_text.stdout
    assert "invariant checks passed" not in as_text.stdout
    assert as_text.stdout.splitlines()[-1] == (
        f"played by cardrules {summary['cardrules_version']}, through --server"
    )


def test_a_summary_through_the_server_counts_as_in_process(grpc_target, capsys):
    """The counts come from the server's score sheets and events: the same as in-process
    (seeds 6 to 8 hold bordstabbe deals and a tie-break deal), but for where it ran
    and the invariant checks that only in-process can run."""
    argv = ["simulate", "krypkasino", "--players", "4", "--target-score", "1", "--json"]
    argv += ["--tie-rule", "tiebreak_deal", "--rule", "bordstabbe", "--seed", "6", "--games", "3"]
    summaries = []
    for server in ((), ("--server", grpc_target)):
        assert cli.main([*argv, *server]) == 0
        summaries.append(json.loads(capsys.readouterr().out))
    local, remote = summaries
    assert (local["bordstabbe_deals"], local["tiebreak_deals"]) == (2, 1)
    assert (local["played"], remote["played"], remote["invariant_checks"]) == (
        "in_process",
        "server",
        None,
    )
    assert {**remote, "played": "in_process", "invariant_checks": None} == {
        **local,
        "invariant_checks": None,
    }


def test_a_server_lost_midway_leaves_the_summary_of_the_games_it_finished():
    """A ``--server`` that dies after 4 of 20 games: those 4 are summarized, marked
    incomplete, and the error names the seeds still to play. It printed the error
    alone, naming no seed, and the games were lost."""
    scores = 0

    def die_after_four_games(name: str, context: grpc.ServicerContext) -> None:
        nonlocal scores
        if scores == 4:
            context.abort(grpc.StatusCode.UNAVAILABLE, "server gone")
        scores += name == "Score"

    with api_server(die_after_four_games) as target:
        done = subprocess.run(
            simulate_command("--players", "2", "--games", "20", "--json", "--server", target),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["complete"], summary["games"], summary["games_asked"]) == (False, 4, 20)
    assert (summary["seeds"], summary["played"]) == ([0, 3], "server")
    (line,) = done.stderr.splitlines()[-1:]
    assert line == (
        f"cardrules: error: {target}: UNAVAILABLE: server gone; stopped after 4 of 20 games "
        "(seeds 0 to 3); the summary covers those; play the rest with --seed 4 --games 16 --summary"
    )


@pytest.mark.parametrize(
    ("games", "signum", "status", "out", "message"),
    [
        ("1", signal.SIGINT, 130, "", "interrupted during the game of seed 7"),
        ("1", signal.SIGTERM, 143, "", "terminated during the game of seed 7"),
        (
            "20",
            signal.SIGTERM,
            143,
            "INCOMPLETE: 3 of 20 games played",
            "terminated after 3 of 20 games (seeds 7 to 9); the summary covers those; "
            "play the rest with --seed 10 --games 17 --summary",
        ),
    ],
    ids=["one-game-SIGINT", "one-game-SIGTERM", "games-SIGTERM"],
)
def test_a_signal_while_a_call_waits_on_the_server(games, signum, status, out, message):
    """A signal while the server takes its time: the games finished are kept (with
    ``--games``), a single game names its seed. SIGTERM ended the run unannounced."""
    held = threading.Event()
    release = threading.Event()
    new_games = 0

    def hold_the_fourth_game(name: str, context: grpc.ServicerContext) -> None:
        nonlocal new_games
        new_games += name == "NewGame"
        if (games == "1" and name == "Play") or new_games == 4:
            held.set()
            release.wait(10)

    with api_server(hold_the_fourth_game) as target:
        simulation = subprocess.Popen(
            simulate_command("--players", "2", "--seed", "7", "--games", games, "--server", target),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            assert held.wait(30)
            simulation.send_signal(signum)
            stdout, stderr = simulation.communicate(timeout=30)
        finally:
            release.set()
            if simulation.poll() is None:
                simulation.kill()
    assert simulation.returncode == status, stderr
    assert (out in stdout) if out else stdout == ""
    assert stderr.splitlines()[-1] == f"cardrules: error: {message}"


def test_a_run_through_a_server_keeps_one_channel_and_closes_it(grpc_target, monkeypatch, capsys):
    """``--server`` opened a channel (a connection and its handshake) per game."""
    opened: list[grpc.Channel] = []
    closed: list[grpc.Channel] = []
    open_channel = grpc.insecure_channel

    def counted(*args: Any, **kwargs: Any) -> grpc.Channel:
        channel = open_channel(*args, **kwargs)
        opened.append(channel)
        close = channel.close

        def counted_close() -> None:
            closed.append(channel)
            close()

        channel.close = counted_close  # type: ignore[method-assign]
        return channel

    monkeypatch.setattr(grpc, "insecure_channel", counted)
    argv = ["simulate", "krypkasino", "--players", "2", "--games", "3", "--json"]
    assert cli.main([*argv, "--server", grpc_target]) == 0
    assert json.loads(capsys.readouterr().out)["games"] == 3
    assert len(opened) == 1 and closed == opened
