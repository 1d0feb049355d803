"""A state through a sealed token and back, as every request takes it (design section 7).

The random-play harness (``tests/engine/krypkasino/test_random_play.py``) sends
every state of its matches through here and plays on from the decoded copy, so a
lossy codec would derail the match or fail its invariant checks.
"""

from __future__ import annotations

from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from engine.krypkasino import State
from service import state_codec
from service.tokens import KeyRing, StateSealer

SEALER = StateSealer(KeyRing.ephemeral(), game="krypkasino")


def sealed_round_trip(state: State, game_id: str) -> State:
    """``state`` encoded, sealed with real AES-256-GCM, opened and decoded again: equal to
    itself, through the checked decoding of plain tokens and the trusted one of sealed."""
    token = SEALER.seal(
        state_codec.state_to_proto(state, game_id).SerializeToString(deterministic=True)
    )
    message = pb.GameState.FromString(SEALER.open(token))
    decoded, decoded_id = state_codec.state_from_proto(message)
    assert decoded_id == game_id
    assert decoded == state
    assert state_codec.state_from_proto(message, trusted=True) == (state, game_id)
    return decoded
