"""Tokens across a key rotation of the server (docs/api.md, "Tokens across a key rotation")."""

from __future__ import annotations

from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

SeatAnswer = pb.LegalMovesResponse | pb.PlayResponse | pb.GetViewResponse
ReadAnswer = pb.LegalMovesResponse | pb.ScoreResponse | pb.GetViewResponse
StateAnswer = pb.NewGameResponse | pb.PlayResponse | ReadAnswer
#: A token as a call takes it: ``bytes``, or as a database driver gives it back
#: (psycopg2's ``memoryview`` of a ``bytea``, a ``bytearray``).
TokenBytes = bytes | bytearray | memoryview


def seat_token_to_keep(response: SeatAnswer, sent: TokenBytes) -> bytes:
    """The seat token to use from now on: the one ``response`` renewed, else ``sent``.

    After the server's keys are rotated, an answer to a call made with a seat
    token under the old key carries the seat's token under the new one; the
    old token stops working once the old key is retired.
    """
    return response.seat_token if response.HasField("seat_token") else bytes(sent)


def state_to_keep(response: StateAnswer, sent: TokenBytes) -> bytes:
    """The state token to store after any call: the one ``response`` carries, else ``sent``.

    ``NewGame`` and ``Play`` always answer with the state to keep (the first, the
    next). A read (``LegalMoves``, ``Score``, ``GetView``) made after a key rotation
    with a state token under the old key carries the same state sealed under the new
    key, and otherwise none: ``sent`` stays the one to keep.
    """
    if isinstance(response, pb.NewGameResponse | pb.PlayResponse):
        # Their state has no presence (always set): HasField would raise.
        return response.state
    return response.state if response.HasField("state") else bytes(sent)
