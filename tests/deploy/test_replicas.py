"""A cluster on one machine (docs/operations.md, "Scaling and load balancing").

Three ``cardrules serve`` processes with the prod overlay's configuration and
one shared key stand in for three pods; the Python client balances calls over
them with ``round_robin``, as it would over the headless Service. Several
seeded games run concurrently; while every game is in its middle, one replica
hangs (SIGSTOP) until every game waits on a call to it, then dies (SIGKILL).
Those calls fail with UNAVAILABLE, the client's retry policy sends them to the
others, and every game finishes with no move lost and the same moves, views
and score as the engine in-process.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from cardrules.client import KrypkasinoClient
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from engine.krypkasino import legal_moves, open_game, play, score
from service import codec
from tests.deploy.manifests import loopback_args, manifest_env, rendered
from tests.service.server_process import TEST_KEY, ServerProcess, start_server

REPLICAS = 3
KILL_AFTER_MOVES = 15  # every game is past this (of about 100) when a replica dies
WAIT = 60.0  # bound on every wait: the test stops by itself
GAMES = (
    pb.GameConfig(players=2, target_score=1),
    pb.GameConfig(players=3, target_score=1),
    pb.GameConfig(players=4, target_score=1),
    pb.GameConfig(players=4, teams=pb.TEAM_MODE_PAIRS, target_score=1),
    pb.GameConfig(players=5, target_score=1),
    pb.GameConfig(players=6, target_score=1, rules=pb.Rules(must_capture_if_able=True)),
)


@dataclass
class Outcome:
    moves: int = 0
    moves_after_kill: int = 0
    final: pb.ScoreResponse | None = None
    expected: pb.ScoreResponse | None = None


def requests_served(server: ServerProcess) -> int:
    return len(server.log_events("request"))


def play_game(
    client: KrypkasinoClient,
    config: pb.GameConfig,
    seed: int,
    outcome: Outcome,
    midway: threading.Event,
    killed: threading.Event,
) -> Outcome:
    """Play a whole game over the wire with the engine in lockstep; signal ``midway``."""
    started = client.new_game(config=config, seed=seed)
    engine, _ = open_game(codec.config_from_proto(config), seed=seed)
    state, tokens, view = started.state, list(started.seat_tokens), started.view
    rng = random.Random(seed)
    while not view.game_over:
        seat = view.turn
        assert seat == engine.turn
        offered = client.legal_moves(state=state, seat=seat, seat_token=tokens[seat]).moves
        expected = legal_moves(engine, seat)
        assert len(offered) == len(expected)
        index = rng.randrange(len(expected))
        assert offered[index] == codec.legal_moves_to_proto(engine, expected)[index]
        answer = client.play(state=state, seat=seat, seat_token=tokens[seat], move=offered[index])
        engine, _ = play(engine, seat, expected[index])
        state, view = answer.state, answer.view
        outcome.moves += 1
        assert view.move_number == engine.move_number == outcome.moves  # no move lost or doubled
        if killed.is_set():
            outcome.moves_after_kill += 1
        if outcome.moves == KILL_AFTER_MOVES:
            midway.set()
    assert engine.over
    outcome.final = client.score(state=state)
    outcome.expected = codec.score_to_proto(score(engine))
    return outcome


def wait_until_midway(midway: list[threading.Event], futures: list[Future[Outcome]]) -> None:
    """Until every game is past ``KILL_AFTER_MOVES``; a game that failed fails the test now."""
    deadline = time.monotonic() + WAIT
    while not all(event.is_set() for event in midway):
        for future in futures:
            if future.done():
                future.result()
        assert time.monotonic() < deadline, "a game did not reach its middle"
        time.sleep(0.05)


def wait_until_stalled(outcomes: list[Outcome]) -> None:
    """Until no game has moved for a while: each waits on a call to the hung replica."""
    deadline = time.monotonic() + WAIT
    previous = -1
    while (moves := sum(outcome.moves for outcome in outcomes)) != previous:
        assert time.monotonic() < deadline, "the games never stalled on the hung replica"
        previous = moves
        time.sleep(0.5)


def test_games_survive_a_replica_killed_mid_game():
    environ = manifest_env(rendered("overlays/prod"), {"CARDRULES_STATE_KEYS": TEST_KEY})
    with ThreadPoolExecutor(REPLICAS) as starting:
        servers = list(
            starting.map(lambda _: start_server(args=loopback_args(), env=environ), range(REPLICAS))
        )
    victim, survivors = servers[0], servers[1:]
    target = "ipv4:" + ",".join(server.target for server in servers)
    midway = [threading.Event() for _ in GAMES]
    killed = threading.Event()
    progress = [Outcome() for _ in GAMES]
    try:
        with (
            KrypkasinoClient(target, load_balancing="round_robin", timeout=20.0) as client,
            ThreadPoolExecutor(len(GAMES)) as pool,
        ):
            futures = [
                pool.submit(play_game, client, config, 1000 + i, progress[i], midway[i], killed)
                for i, config in enumerate(GAMES)
            ]
            wait_until_midway(midway, futures)
            victim.process.send_signal(signal.SIGSTOP)
            wait_until_stalled(progress)
            before = [requests_served(server) for server in servers]
            killed.set()
            victim.process.send_signal(signal.SIGKILL)
            victim.process.wait(WAIT)
            outcomes = [future.result(timeout=WAIT) for future in futures]
        after = [requests_served(server) for server in survivors]
        exit_codes = [server.terminate() for server in survivors]
    finally:
        for server in servers:
            server.kill()  # clean-up only if something above failed

    assert victim.process.returncode == -signal.SIGKILL
    assert exit_codes == [0] * len(survivors)  # the others still drain and exit cleanly
    # Round robin used all three replicas before the kill, the two others after it.
    assert all(count > 0 for count in before), before
    assert all(now > then for now, then in zip(after, before[1:], strict=True)), (before, after)
    for config, outcome in zip(GAMES, outcomes, strict=True):
        assert outcome.moves_after_kill > 0, config  # the kill really was mid-game
        assert outcome.final == outcome.expected, config
        assert outcome.final is not None and outcome.final.game_over
