"""The random-play harness with a token round trip at every step (design section 7).

Every state of seeded random matches over every configuration of the engine
harness (and over random ones, ``random_config``) is encoded, sealed with real AES-256-GCM, opened, decoded and
compared with the original; play then continues from the decoded copy, so a
lossy codec would derail the match.
"""

from __future__ import annotations

import random

import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from engine.krypkasino import State, legal_moves, new_game, play_unchecked
from service import state_codec
from service.tokens import KeyRing, StateSealer
from tests.engine.krypkasino.configs import CONFIGS, config_label, random_config
from tests.sizes import random_games

SEALER = StateSealer(KeyRing.ephemeral(), game="krypkasino")
# A quarter of the harness' budget, but every configuration at least once; beyond
# that, every other game has a random configuration, as in the engine's harness.
_FIXED = len(CONFIGS)
GAMES = [
    (CONFIGS[i] if i < _FIXED else CONFIGS[i % _FIXED] if i % 2 else random_config(i), 500 + i)
    for i in range(max(_FIXED, random_games() // 4))
]


def _round_trip(state: State, game_id: str) -> State:
    token = SEALER.seal(
        state_codec.state_to_proto(state, game_id).SerializeToString(deterministic=True)
    )
    message = pb.GameState.FromString(SEALER.open(token))
    decoded, decoded_id = state_codec.state_from_proto(message)
    assert decoded_id == game_id
    assert decoded == state
    # The fast path for sealed tokens decodes the same state without the checks.
    assert state_codec.state_from_proto(message, trusted=True) == (state, game_id)
    return decoded


@pytest.mark.parametrize(
    ("config", "seed"), GAMES, ids=[f"{seed}-{config_label(config)}" for config, seed in GAMES]
)
def test_every_state_survives_a_sealed_round_trip(config, seed):
    policy = random.Random(seed)
    state = _round_trip(new_game(config, seed=seed), f"game-{seed}")
    steps = 0
    while not state.over:
        state, _ = play_unchecked(state, policy.choice(legal_moves(state, state.turn)))
        state = _round_trip(state, f"game-{seed}")
        steps += 1
    assert steps > 0 and state.results
