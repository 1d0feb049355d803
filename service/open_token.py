"""``cardrules open-token``: the whole content of one state token, for an audit
(docs/api.md, "Keeping a game's record for disputes"; design section 4).

The token is opened as a server opens it: by ``service.tokens.StateSealer`` under any
key of the ring given, its ``GameState`` decoded and checked as the server decodes it
(``state_codec.state_from_proto``: trusted once sealed, checked when plain), and its
``state_id`` computed from the same plaintext as a view's (``state_codec.state_id``).
No crypto of its own: what opens here opens on a server with the same keys.

What it prints holds every hand, the stock and the seed (every card of the match to
come): it is for auditors, never for players.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf import json_format
from google.protobuf.message import DecodeError

from service import codec, state_codec
from service.serve_command import NO_KEYS
from service.server import SCHEMA_VERSION, build_sealer
from service.tokens import (
    KEY_ID_BYTES,
    PLAIN_FLAG,
    SEAT_TOKEN_BYTES,
    KeyRing,
    TokenError,
)

#: Exit statuses (service/cli.py): the input is no state token, or no keys to open it
#: with, as for any bad input; a state token that the keys given do not open (or that
#: holds no state this release reads), which is what an audit looks for.
BAD_INPUT = 2
DOES_NOT_OPEN = 1
#: The most stdin may hold: the largest state token, of a finished 240-deal match, is
#: about 34 KB (46 KB in base64), so more is no token. Read at most one byte more, so
#: that ``< /dev/zero`` or a wrong file is refused at once, not read into the memory.
MAX_STDIN_BYTES = 1024 * 1024

_RAW_BYTES_HINT = (
    "give the state token as base64 text (standard or URL-safe), as HTTP/JSON carries it; "
    "raw token bytes, as gRPC gives them: base64 -w0 < FILE | cardrules open-token"
)
_WHITE_SPACE = re.compile(rb"\s")
# A byte of neither base64 alphabet, nor padding, nor white space: raw token bytes
# (gRPC's), which nearly always hold a 0x0a or 0x20 too, and so read as several words.
_NOT_BASE64 = re.compile(rb"[^A-Za-z0-9+/_=\s-]")


class OpenTokenError(Exception):
    """Why a token is not shown, never quoting it, and the exit status (``BAD_INPUT``
    or ``DOES_NOT_OPEN``); ``reason`` is the refusal's reason on a server
    (docs/api.md, "Errors"), where there is one."""

    def __init__(self, message: str, status: int, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = f"{reason}: {message}" if reason else message
        self.status = status


@dataclass(frozen=True)
class OpenedToken:
    """A state token's ``GameState``, its ``state_id`` and the id of the key that sealed
    it (None for a plain token)."""

    state: pb.GameState
    state_id: str
    key_id: str | None

    def to_json(self) -> str:
        """``state_id``, ``key_id``, ``plain`` and ``state``: the ``GameState`` as proto3
        JSON with the proto's field names (``move_number``, not ``moveNumber``) and every
        field without presence, zero or empty ones too (an ``optional`` field or a message
        appears only when set, as in HTTP/JSON answers). As proto3 JSON has them, the
        64-bit numbers (``seed``, ``move_number``) are strings and the bytes fields base64;
        each byte of a card field is an engine card code, ``rank * 4 + suit``
        (docs/api.md)."""
        document: dict[str, Any] = {
            "state_id": self.state_id,
            "key_id": self.key_id,
            "plain": self.key_id is None,
            "state": json_format.MessageToDict(
                self.state,
                preserving_proto_field_name=True,
                always_print_fields_with_no_presence=True,
            ),
        }
        return json.dumps(document, indent=2) + "\n"


def token_from_text(data: bytes) -> bytes:
    """The token that ``data`` (what was read from stdin) spells in base64, standard or
    URL-safe, padding optional, white space around it ignored. Raises ``OpenTokenError``
    (``BAD_INPUT``) for more than ``MAX_STDIN_BYTES`` (the caller reads at most one byte
    more), no text, a byte of no base64 (raw token bytes, told how to encode them) even
    among several words, more than one word, or anything else but base64."""
    if len(data) > MAX_STDIN_BYTES:
        raise OpenTokenError(
            f"stdin is larger than {MAX_STDIN_BYTES} bytes: give one state token (the "
            "largest is about 46 KB in base64)",
            BAD_INPUT,
        )
    text = data.strip()
    if not text:
        raise OpenTokenError(f"no state token on stdin: {_RAW_BYTES_HINT}", BAD_INPUT)
    if _NOT_BASE64.search(text):  # before the words: raw bytes have white space too
        raise OpenTokenError(f"stdin is not base64: {_RAW_BYTES_HINT}", BAD_INPUT)
    if _WHITE_SPACE.search(text):
        raise OpenTokenError(
            "stdin holds more than one word: give one state token, its base64 on one line "
            "(base64 wrapped over lines: join them, e.g. base64 -w0)",
            BAD_INPUT,
        )
    normalized = text.rstrip(b"=").replace(b"-", b"+").replace(b"_", b"/")
    normalized += b"=" * (-len(normalized) % 4)
    try:
        token = base64.b64decode(normalized, validate=True)
    except binascii.Error:
        # ``from None``: the underlying error could quote the token.
        raise OpenTokenError(f"stdin is not base64: {_RAW_BYTES_HINT}", BAD_INPUT) from None
    if not token:  # only padding: "=" or "=="
        raise OpenTokenError(f"stdin is not base64: {_RAW_BYTES_HINT}", BAD_INPUT)
    return token


def open_state_token(token: bytes, keys: KeyRing | None) -> OpenedToken:
    """``token`` opened under any key of ``keys`` as a server with them opens it; with
    ``keys`` None, only a plain token, as a ``--plain-state`` server would (with the
    checks a plain state gets). Raises ``OpenTokenError``."""
    if len(token) == SEAT_TOKEN_BYTES:
        # No state token is this short (a sealed one has 33 bytes of overhead alone, a
        # plain one a whole state): a seat token is 20 bytes, key id and MAC.
        raise OpenTokenError(
            f"that is a seat token ({SEAT_TOKEN_BYTES} bytes: a key id and a MAC of the "
            "game id and seat, holding no state), not a state token",
            BAD_INPUT,
        )
    plain = bool(token[0] & PLAIN_FLAG)
    if keys is None and not plain:
        raise OpenTokenError(f"{NO_KEYS} (the token is sealed)", BAD_INPUT)
    if keys is not None and plain:
        # As a server with these keys refuses it: anyone can write a plain token, so
        # opening it under the production keys would vouch for a forgery.
        raise OpenTokenError(
            "a plain state token, which a server with these keys refuses (anyone can "
            "write one, so it proves nothing); give no keys to read it as a --plain-state "
            "server would",
            DOES_NOT_OPEN,
            "TOKEN_PLAIN_DISABLED",
        )
    # plain=True opens sealed tokens under the ring exactly as a sealing server does,
    # and (given no keys) plain ones as a --plain-state server does; the ephemeral key
    # opens nothing.
    ring = KeyRing.ephemeral() if keys is None else keys
    sealer = build_sealer(ring, plain=True)
    try:
        payload = sealer.open(token)
    except TokenError as error:
        raise _refusal(error, token, keys) from None
    state = _checked_state(payload, sealed=not plain)
    key_id = None if plain else token[1 : 1 + KEY_ID_BYTES].hex()
    return OpenedToken(state, state_codec.state_id(payload), key_id)


def _checked_state(payload: bytes, *, sealed: bool) -> pb.GameState:
    """The ``GameState`` of an opened token, refused as a server refuses it: a sealed one
    only when it holds fields this release does not know (a newer release sealed it,
    and printing it would drop them), a plain one also for any inconsistency."""
    try:
        message = pb.GameState.FromString(payload)
    except DecodeError:
        raise OpenTokenError(
            "the state token does not hold a game state", DOES_NOT_OPEN, "STATE_INVALID"
        ) from None
    try:
        state_codec.state_from_proto(message, trusted=sealed)
    except codec.NewerReleaseError as error:
        raise OpenTokenError(
            f"{error.description}: a newer release sealed or wrote it; open it with the "
            "cardrules of that release, which reads every field",
            DOES_NOT_OPEN,
            "TOKEN_FROM_NEWER_RELEASE" if sealed else "STATE_INVALID",
        ) from None
    except codec.CodecError as error:
        raise OpenTokenError(
            f"state: {error.description}", DOES_NOT_OPEN, "STATE_INVALID"
        ) from None
    return message


def _refusal(error: TokenError, token: bytes, keys: KeyRing | None) -> OpenTokenError:
    """``error`` in this command's words: the server's say "this server"."""
    if error.reason == "TOKEN_UNKNOWN_KEY":
        given = ", ".join(keys.hex_ids()) if keys else ""
        return OpenTokenError(
            f"the state token was sealed with key id {error.metadata['key_id']}, which is "
            f"none of the keys given ({given}): cardrules keyid prints a key's id",
            DOES_NOT_OPEN,
            error.reason,
        )
    if error.reason == "TOKEN_MALFORMED":
        return OpenTokenError(f"{error.message}: no state token", BAD_INPUT, error.reason)
    if error.reason == "TOKEN_FROM_NEWER_RELEASE":
        return OpenTokenError(
            f"state token schema version {error.metadata['version']} is from a newer "
            f"release (this one reads version {SCHEMA_VERSION}): open it with that "
            "release's cardrules",
            DOES_NOT_OPEN,
            error.reason,
        )
    if error.reason == "TOKEN_SCHEMA_UNSUPPORTED":
        return OpenTokenError(
            f"state token schema version {error.metadata['version']} is not one this "
            f"release reads (version {SCHEMA_VERSION})",
            DOES_NOT_OPEN,
            error.reason,
        )
    # TOKEN_INVALID: altered, truncated, or of another game type. TOKEN_PLAIN_DISABLED
    # cannot happen here: a plain token given keys is refused before opening.
    return OpenTokenError(error.message, DOES_NOT_OPEN, error.reason)
