"""A refusal is the same bytes from every replica (docs/api.md, "HTTP/JSON": ``metadata``'s
keys in alphabetical order).

protobuf orders a map, such as ``ErrorInfo.metadata``, by a hash table whose order
changes with each process, so unless packed deterministically two replicas (or one
after a restart) sent the same refusal as other gRPC trailer bytes and other JSON.
"""

from __future__ import annotations

import subprocess
import sys

import google.rpc.error_details_pb2 as error_details_pb2
import grpc
import pytest
from cardrules.client import KrypkasinoClient, error_info
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from service.errors import invalid_argument

# A refusal with six metadata keys, written out by a fresh interpreter as its gRPC status
# bytes and its HTTP/JSON body.
ONE_REFUSAL = """
import sys
from service.errors import failed_precondition
from service.http_json import status_json

error = failed_precondition(
    "CAPTURE_NOT_ON_TABLE", "2D is in seat 1's hand, not on the table (K7.3)",
    rule="K7.3", seat="1", card="2D", captured_card="2D", table_count="0", in_hand="true",
)
sys.stdout.write(error.to_status().SerializeToString().hex() + "\\n" + status_json(error).decode())
"""
PROCESSES = 4


def test_every_process_sends_a_refusal_as_the_same_bytes_with_its_metadata_keys_sorted():
    outputs = {
        subprocess.run(
            [sys.executable, "-c", ONE_REFUSAL], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(PROCESSES)
    }
    assert len(outputs) == 1, outputs
    body = outputs.pop().splitlines()[1]
    keys = ["captured_card", "card", "in_hand", "rule", "seat", "table_count"]
    assert [body.index(f'"{key}":') for key in keys] == sorted(
        body.index(f'"{key}":') for key in keys
    ), body


def test_the_client_gives_a_refusals_metadata_in_key_order(grpc_target: str):
    with KrypkasinoClient(grpc_target) as client:
        game = client.new_game(players=2, seed=7)
        seat = game.view.turn
        token = game.seat_tokens[seat]
        card = client.legal_moves(state=game.state, seat=seat, seat_token=token).moves[0].move.card
        with pytest.raises(grpc.RpcError) as refused:
            client.play(
                state=game.state,
                seat=seat,
                seat_token=token,
                move=pb.Move(card=card, captures=[card] * 3),
            )
    info = error_info(refused.value)
    assert info is not None and info.reason == "CAPTURE_NOT_ON_TABLE"
    assert len(info.metadata) >= 5
    assert list(info.metadata) == sorted(info.metadata), info.metadata


def test_a_refusal_echoing_a_lone_surrogate_is_still_a_status_with_it_escaped():
    """service/errors.py: a refusal may quote text decoded with ``surrogateescape`` (a
    header) or a JSON ``\\udXXX`` escape; protobuf strings must be UTF-8, so each part of
    the status shows it backslash-escaped instead of failing to be made (a 500)."""
    error = invalid_argument(
        "JSON_INVALID", "a\udcffb: x", "a\udcffb", description="d\udcff", echoed="m\udcff"
    )
    status = error.to_status()
    status.SerializeToString()
    assert status.message == "a\\udcffb: x"
    bad_request = error_details_pb2.BadRequest()
    assert status.details[1].Unpack(bad_request)
    (violation,) = bad_request.field_violations
    assert (violation.field, violation.description) == ("a\\udcffb", "d\\udcff")
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert dict(info.metadata) == {"echoed": "m\\udcff"}
