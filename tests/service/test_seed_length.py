"""The seeds the server picks all take one length in the state (docs/api.md, "State
tokens": "A seed is every card"), so that no token's length, nor the ``Content-Length``
of an answer that holds one, TLS or not, narrows a brute force over the seed.

``GameState.seed`` is a varint: ``secrets.randbits(63)`` gave 1 game in 128 a seed
below 2**56, sealed one byte shorter (a fairness review). Each range check below passes
for 63 random bits with odds of at most (127/128)**2000, about 10**-7.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from engine.cards import full_deck
from engine.krypkasino import Config
from service.calls import CallInfo
from service.config import ServerConfig
from service.krypkasino_api import KrypkasinoApi
from service.server import build_api
from service.tokens import KeyRing, SeatTokens, StateSealer
from tests.service.grpc_helpers import Stub, deck_proto
from tests.service.server_process import TEST_KEY

SEED_FIELD_BYTES = 1 + 9  # GameState.seed: its tag, then a 9-byte varint
#: Every seed whose varint is 9 bytes, less the ones over 63 bits.
SEED_LOW, SEED_HIGH = 2**56, 2**63


def seed_bytes(payload: bytes) -> int:
    """How many bytes of a GameState ``payload`` its seed takes, tag included."""
    state = pb.GameState.FromString(payload)
    without = pb.GameState()
    without.CopyFrom(state)
    without.ClearField("seed")
    return len(payload) - len(without.SerializeToString(deterministic=True))


def test_the_range_is_every_9_byte_varint_below_2_to_the_63() -> None:
    for seed in (SEED_LOW, SEED_HIGH - 1):
        assert seed_bytes(pb.GameState(seed=seed).SerializeToString()) == SEED_FIELD_BYTES
    assert seed_bytes(pb.GameState(seed=SEED_LOW - 1).SerializeToString()) == SEED_FIELD_BYTES - 1


def test_the_default_seed_factory_draws_only_from_the_range() -> None:
    """The factory ``KrypkasinoApi`` uses unless given another: 100,000 draws, all in
    [2**56, 2**63), spread over it (random, not a constant)."""
    factory: Callable[[], int] = inspect.signature(KrypkasinoApi).parameters["new_seed"].default
    seeds = [factory() for _ in range(100_000)]
    outside = [seed for seed in seeds if not SEED_LOW <= seed < SEED_HIGH]
    assert outside == [], f"{len(outside)} of 100,000 outside, such as {outside[0]}"
    assert len(set(seeds)) == len(seeds)
    assert min(seeds) < SEED_LOW + (SEED_HIGH - SEED_LOW) // 4
    assert max(seeds) > SEED_HIGH - (SEED_HIGH - SEED_LOW) // 4


def test_unseeded_new_games_in_process_spend_ten_bytes_on_the_seed() -> None:
    """The server's own API, as ``cardrules serve`` builds it (plain tokens, so the test
    reads them): 10,000 unseeded games, each seed 9 bytes in the state."""
    api = build_api(ServerConfig(plain_state=True), KeyRing.ephemeral(), None)
    request = pb.NewGameRequest(config=pb.GameConfig(players=4))
    short = []
    for _ in range(10_000):
        payload = api.new_game(request, CallInfo()).state[1:]
        if seed_bytes(payload) != SEED_FIELD_BYTES:
            short.append(pb.GameState.FromString(payload).seed)
    assert short == [], f"{len(short)} of 10,000 seeds not 9 bytes long, such as {short[0]}"


def test_unseeded_new_games_of_a_real_server_spend_ten_bytes_on_the_seed(stub: Stub) -> None:
    """Over gRPC from the session's sealing server (it seals with ``TEST_KEY``, so its
    tokens open here): 2,000 unseeded games, each seed in the range and 9 bytes long, and
    each token its payload's length plus the sealing's fixed overhead."""
    sealer = StateSealer(KeyRing.parse(TEST_KEY), game="krypkasino")
    request = pb.NewGameRequest(config=pb.GameConfig(players=2))
    overheads = set()
    outside = []
    for _ in range(2_000):
        token = stub.NewGame(request, timeout=10).state
        payload = sealer.open(token)
        overheads.add(len(token) - len(payload))
        seed = pb.GameState.FromString(payload).seed
        if not SEED_LOW <= seed < SEED_HIGH or seed_bytes(payload) != SEED_FIELD_BYTES:
            outside.append(seed)
    assert outside == [], f"{len(outside)} of 2,000 seeds outside the range, such as {outside[0]}"
    assert overheads == {1 + 4 + 12 + 16}  # version, key id, nonce, GCM tag


def test_a_sealed_new_game_is_as_long_for_the_lowest_seed_as_for_the_highest() -> None:
    """Two games alike but for the seed, at either end of the range, seal to tokens of
    one length; a seed just below the range would seal a byte shorter."""
    api = KrypkasinoApi(
        StateSealer(KeyRing.ephemeral(), game="krypkasino"),
        SeatTokens(KeyRing.ephemeral()),
        new_game_id=lambda: "same-game",
    )
    config = pb.GameConfig(players=2)
    deck = deck_proto(full_deck(Config(2).validate().copies))

    def token_length(seed: int) -> int:
        # Every deal's deck given, so that the seed changes nothing but itself.
        request = pb.NewGameRequest(config=config, seed=seed, decks=[deck] * 2)
        return len(api.new_game(request, CallInfo()).state)

    assert token_length(SEED_LOW) == token_length(SEED_HIGH - 1)
    assert token_length(SEED_LOW - 1) == token_length(SEED_LOW) - 1
