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
    """The state token after any call: the one ``response`` carries, else ``sent``.

    ``NewGame`` and ``Play`` always answer with the state to keep (the first, the
    next). A read (``LegalMoves``, ``Score``, ``GetView``) made after a key rotation
    with a state token under the old key carries the same state sealed under the new
    key, and otherwise none: ``sent`` stays the one to keep.

    A backend that stores games writes every state with a compare-and-set on the
    ``state_id`` it stored beside ``sent`` (docs/api.md, "Replays and optimistic
    concurrency"), a read's renewed one included: a ``Play`` from the same state may
    have stored its next state since ``sent`` was read, and writing the renewed
    ``sent`` over it would undo that move. Not on the bytes: a renewal keeps the
    ``state_id`` but not the bytes, so a ``Play`` from the bytes loaded before a
    renewal was stored would match nothing. ``renewed_state`` gives a read's renewal
    alone, to write only on that condition.
    """
    if isinstance(response, pb.NewGameResponse | pb.PlayResponse):
        # Their state has no presence (always set): HasField would raise.
        return response.state
    return response.state if response.HasField("state") else bytes(sent)


def renewed_state(response: ReadAnswer) -> bytes | None:
    """The state a read renewed under the server's current key, or None if it renewed none.

    A read (``LegalMoves``, ``Score``, ``GetView``) sent a state token under a key that
    is no longer the server's first answers with the same state (same ``state_id``)
    sealed under the first (docs/api.md, "Tokens across a key rotation"). Store it only
    where the stored state is still the one sent, on the ``state_id`` stored beside it:
    ``UPDATE games SET state = $renewed WHERE id = $id AND state_id = $sent_state_id``.
    A ``Play`` from that state may have stored its next state (and ``state_id``)
    meanwhile, which the renewal would undo; a write that matches nothing loses
    nothing, as the stored state is a later one. Never compare the bytes: the renewal
    changes them but not the ``state_id``, so a ``Play`` from the bytes loaded before it
    would then fail its own compare-and-set though no other move was stored.
    """
    try:
        renewed = response.HasField("state")
    except ValueError:
        # A Play's or NewGame's state, which has no presence: a new state, never a
        # renewal. HasField's own error names no reason.
        raise TypeError(
            "renewed_state takes a read's answer (LegalMoves, Score, GetView), not a "
            f"{type(response).__name__}, whose state is the next one to store"
        ) from None
    return response.state if renewed else None
