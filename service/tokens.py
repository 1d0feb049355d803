"""Sealed state tokens and seat tokens (design section 4).

A sealed state token is ``version | key id (4) | nonce (12) | AES-256-GCM
ciphertext+tag`` with ``b"cardrules/" + game + b"/" + version`` as associated
data, so a token of another game type or schema version never opens (one of
another match of the same game type does: the seat tokens bind the game id). A
plain token (debugging only, switched on explicitly) is ``0x80 | version``
followed by the payload. Keys come as a ring: the first seals, all open, so keys
rotate without downtime. Seat tokens are ``key id (4) | HMAC-SHA256(seat key, game
id, seat)[:16]`` where the seat key is derived from the same configured key by
HKDF, so one key serves both purposes without being reused.

A sealed token of a later schema version that authenticates under the
associated data of its own version was made by a newer release of this
service (``TOKEN_FROM_NEWER_RELEASE``: during a rolling upgrade another
replica can read it), so later releases keep this header and associated
data. One that does not authenticate is ``TOKEN_INVALID`` (or
``TOKEN_UNKNOWN_KEY``); an earlier version, or on a plain-mode server a plain
token of another version, is ``TOKEN_SCHEMA_UNSUPPORTED``. A sealing server
refuses any plain token as ``TOKEN_PLAIN_DISABLED``.

Errors never carry token bytes or key material: tokens must never be logged.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import os
import re
import string
from dataclasses import dataclass
from typing import Literal, NoReturn

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

KEY_BYTES = 32
KEY_ID_BYTES = 4
NONCE_BYTES = 12
TAG_BYTES = 16
PLAIN_FLAG = 0x80
MAX_SCHEMA_VERSION = 0x7F
SEALED_OVERHEAD = 1 + KEY_ID_BYTES + NONCE_BYTES + TAG_BYTES
SEAT_MAC_BYTES = 16
SEAT_TOKEN_BYTES = KEY_ID_BYTES + SEAT_MAC_BYTES
SEAT_KEY_INFO = b"cardrules seat token v1"
SEAT_MAC_CACHE_SIZE = 4096  # (key id, game id, seat) triples: about 1 MB
_MAX_SEAT = 2**32 - 1
_URL_SAFE = str.maketrans("+/", "-_")

TokenReason = Literal[
    "TOKEN_MALFORMED",
    "TOKEN_SCHEMA_UNSUPPORTED",
    "TOKEN_FROM_NEWER_RELEASE",
    "TOKEN_UNKNOWN_KEY",
    "TOKEN_INVALID",
    "TOKEN_PLAIN_DISABLED",
]
SeatTokenReason = Literal["SEAT_TOKEN_MISSING", "SEAT_TOKEN_INVALID"]
NEWER_RELEASE: TokenReason = "TOKEN_FROM_NEWER_RELEASE"


class TokenError(Exception):
    """A state token that does not open; ``message`` never contains token bytes.

    ``metadata`` holds its dynamic values for the ErrorInfo (design section 5).
    """

    def __init__(self, reason: TokenReason, message: str, **metadata: str) -> None:
        super().__init__(message)
        self.reason: TokenReason = reason
        self.message = message
        self.metadata = metadata


class SeatTokenError(Exception):
    """A missing or wrong seat token; ``message`` never contains token bytes.

    ``metadata`` holds its dynamic values for the ErrorInfo (design section 5).
    """

    def __init__(self, reason: SeatTokenReason, message: str, **metadata: str) -> None:
        super().__init__(message)
        self.reason: SeatTokenReason = reason
        self.message = message
        self.metadata = metadata

    @property
    def unknown_key(self) -> bool:
        """A token under a key id no key of the ring has (a key retired too soon, pods
        with different key lists, or junk bytes): ``SEAT_TOKEN_INVALID`` whose metadata
        names the ``key_id``, which no other refusal of a seat token carries."""
        return "key_id" in self.metadata


@dataclass(frozen=True, repr=False)
class KeyRing:
    """AES-256 keys: ``keys[0]`` seals and issues, every key opens and verifies.

    ``is_ephemeral`` marks the one key a server makes up at start when none is configured.
    """

    keys: tuple[bytes, ...]
    is_ephemeral: bool = False

    def __post_init__(self) -> None:
        if not self.keys:
            raise ValueError("a key ring needs at least one key")
        seen: dict[bytes, int] = {}
        for position, key in enumerate(self.keys, start=1):
            if len(key) != KEY_BYTES:
                raise ValueError(
                    f"key {position} is {len(key)} bytes; AES-256 keys are {KEY_BYTES} bytes"
                )
            key_id = self.key_id(key)
            if key_id in seen:
                # A key id collision of distinct keys (odds 2**-32) would make
                # opening ambiguous, so it is refused like a duplicate.
                raise ValueError(f"key {position} duplicates key {seen[key_id]}")
            seen[key_id] = position

    def __repr__(self) -> str:
        # Never key material: only the public key ids.
        return f"KeyRing(key_ids=[{', '.join(self.key_id(k).hex() for k in self.keys)}])"

    @classmethod
    def parse(cls, text: str) -> KeyRing:
        """Keys as base64 (standard or urlsafe, padding optional), comma or space separated.

        Raises ``ValueError`` naming the 1-based position of a bad key, never its text.
        An empty entry (``,NEW``) is refused: it is what a script writes when reading the
        current keys failed, and a ring without the old key breaks every game in play.
        """
        if _ASSIGNMENT.match(text):
            # A keys file copied from an env file: the name is not part of the key.
            raise ValueError(
                "the keys are written as a variable's setting (NAME=...): give the keys "
                "alone, as `cardrules keygen` prints them"
            )
        items = re.split(r"\s*,\s*|\s+", text.strip())
        if not any(items):
            raise ValueError(
                "no keys given: expected base64 AES-256 keys, separated by commas, "
                "spaces or new lines"
            )
        return cls(tuple(_decode_key(item, position) for position, item in enumerate(items, 1)))

    @classmethod
    def ephemeral(cls) -> KeyRing:
        """One fresh random key: the single-machine default (design section 4)."""
        return cls((os.urandom(KEY_BYTES),), is_ephemeral=True)

    @staticmethod
    def key_id(key: bytes) -> bytes:
        """The first 4 bytes of SHA-256 of the key: names the key in tokens, reveals nothing."""
        return hashlib.sha256(key).digest()[:KEY_ID_BYTES]

    def hex_ids(self) -> list[str]:
        """The id in hex of each key, the primary (sealing) key first, as ``cardrules
        keyid`` prints them."""
        return [self.key_id(key).hex() for key in self.keys]

    def seat_token_pattern(self) -> re.Pattern[str]:
        """The text of a seat token under any key, in standard or URL-safe base64: its
        first 5 characters hold 30 bits of the key id alone, the other 22 are the rest
        of its 20 bytes (``service.calls.request_id_from`` looks for it). A lookahead,
        so that ``findall`` gives the text at every place, overlapping: a run of hex
        digits that begins with a key id's start (``request_id_from`` passes those) may
        hold a token's first letters."""
        starts = (base64.b64encode(self.key_id(key)).decode()[:5] for key in self.keys)
        texts = dict.fromkeys(
            text for start in starts for text in (start, start.translate(_URL_SAFE))
        )
        rest = -(-SEAT_TOKEN_BYTES * 4 // 3) - 5
        return re.compile(f"(?=((?:{'|'.join(map(re.escape, texts))})[A-Za-z0-9+/_-]{{{rest}}}))")

    def weak_keys(self) -> list[tuple[str, str]]:
        """(key id in hex, why) of each key that is no random key (``weakness``)."""
        return [(self.key_id(key).hex(), why) for key in self.keys if (why := weakness(key))]

    @staticmethod
    def generate_key_text() -> str:
        """A new random key in standard padded base64 (same form as ``openssl rand -base64 32``)."""
        return base64.b64encode(os.urandom(KEY_BYTES)).decode("ascii")


#: The bytes of text: a key all of them is a passphrase, not random bytes.
_PRINTABLE_ASCII = frozenset(range(0x20, 0x7F))


def weakness(key: bytes) -> str | None:
    """Why ``key`` reads as made by hand rather than drawn at random, or None.

    Such a key seals as any other, but one guessed (``AAAA...A=``, a phrase) forges every
    state and seat token. A random key is never flagged: its 32 bytes are all equal with
    odds of 2**-248, all printable ASCII (95 of 256 values) with odds of about 2e-14.
    """
    if len(set(key)) == 1:
        return f"its {len(key)} bytes are all equal"
    if _PRINTABLE_ASCII.issuperset(key):
        return f"its {len(key)} bytes are all printable ASCII: a passphrase, not random bytes"
    return None


# ``CARDRULES_STATE_KEYS=...`` or ``export KEYS=...``: a variable's setting, not keys. A
# key's own "=" only pads its end, before a separator: never before more key or a quote.
_ASSIGNMENT = re.compile(r"\s*(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=[\w+/\-\"']")


#: Quotes an env file's value keeps when its reader does not take them off, and the
#: typographic ones a word processor or a chat puts around a pasted value: each opening
#: quote with its closing one.
_QUOTE_PAIRS = {
    '"': '"',
    "'": "'",
    "\u201c": "\u201d",
    "\u2018": "\u2019",
    "\u201e": "\u201c",
    "\u00ab": "\u00bb",
}


def _decode_key(item: str, position: int) -> bytes:
    """One base64 key of either alphabet; errors name the position only."""
    if not item:
        raise ValueError(
            f"key {position} is empty (a comma at an end of the list, or two in a row)"
        )
    if len(item) >= 2 and _QUOTE_PAIRS.get(item[0]) == item[-1]:
        # ``docker run --env-file`` and a Kustomize env file keep a value's quotes.
        raise ValueError(f"key {position} is quoted: give the key without quotes")
    normalized = item.rstrip("=").replace("-", "+").replace("_", "/")
    normalized += "=" * (-len(normalized) % 4)
    try:
        key = base64.b64decode(normalized.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        if item[0] in _QUOTE_PAIRS or item[-1] in _QUOTE_PAIRS.values():
            # A list quoted whole ("OLD,NEW"): its first key opens the quote.
            raise ValueError(
                f"key {position} starts or ends with a quote: give the keys without quotes"
            ) from None
        # ``from None``: the underlying error could quote the key text.
        raise ValueError(f"key {position} is not valid base64") from None
    if len(key) != KEY_BYTES:
        hint = ""
        if len(item) == 2 * KEY_BYTES and all(c in string.hexdigits for c in item):
            # What ``openssl rand -hex 32`` prints: the right key, in the wrong spelling.
            hint = (
                f" (it reads as {2 * KEY_BYTES} hex digits: give the key in base64, as "
                "`cardrules keygen` or `openssl rand -base64 32` print it)"
            )
        raise ValueError(
            f"key {position} decodes to {len(key)} bytes; AES-256 keys are {KEY_BYTES} bytes" + hint
        )
    return key


class StateSealer:
    """Seals and opens the state tokens of one game and schema version (design section 4)."""

    def __init__(
        self, keys: KeyRing, *, game: str, schema_version: int = 1, plain: bool = False
    ) -> None:
        if not 1 <= schema_version <= MAX_SCHEMA_VERSION:
            raise ValueError(
                f"schema version must be 1..{MAX_SCHEMA_VERSION}, not {schema_version}"
            )
        if not game:
            raise ValueError("game must not be empty")
        self._version = schema_version
        self._plain_byte = PLAIN_FLAG | schema_version
        self._plain = plain
        self._associated_prefix = b"cardrules/" + game.encode("utf-8") + b"/"
        self._associated = self._associated_prefix + bytes([schema_version])
        # One AESGCM per key, built once: the hot path only looks one up.
        self._aeads = {KeyRing.key_id(key): AESGCM(key) for key in keys.keys}
        primary_id = KeyRing.key_id(keys.keys[0])
        self._seal_header = bytes([schema_version]) + primary_id
        self._seal_aead = self._aeads[primary_id]
        # What a developer meets after restarting a server that runs on the default key.
        self._unknown_key_cause = (
            "; this server made its key up at start (no CARDRULES_STATE_KEYS), so tokens "
            "from before a restart or from another server cannot open"
            if keys.is_ephemeral
            else ""
        )

    def seal(self, payload: bytes) -> bytes:
        """The token for ``payload``: sealed under the primary key, or plain in plain mode."""
        if self._plain:
            return bytes([self._plain_byte]) + payload
        nonce = os.urandom(NONCE_BYTES)
        return self._seal_header + nonce + self._seal_aead.encrypt(nonce, payload, self._associated)

    def renewal(self, token: bytes, payload: bytes) -> bytes | None:
        """``payload`` sealed afresh if ``token`` (opened) is sealed under a key other than the
        primary, else None; plain tokens, and any token on a plain server, are not renewed.

        Only ``NewGame`` and ``Play`` seal a new state: without this, a game that
        is read but not played would break once the key that sealed it left the
        ring. Plain tokens are never renewed (a sealing server refuses them before
        this anyway): sealing one would make a state that was never checked trusted.
        """
        # An opened sealed token has this server's version byte, so its header is
        # this server's exactly when it is under the primary key.
        if self._plain or token[0] & PLAIN_FLAG or token.startswith(self._seal_header):
            return None
        return self.seal(payload)

    def open(self, token: bytes) -> bytes:
        """The payload of ``token``; raises ``TokenError`` (and nothing else) for any bad bytes."""
        if not token:
            raise TokenError("TOKEN_MALFORMED", "state token is empty")
        version_byte = token[0]
        version = version_byte & ~PLAIN_FLAG
        if version == 0:
            raise TokenError("TOKEN_MALFORMED", "state token has no valid header")
        plain = bool(version_byte & PLAIN_FLAG)
        if len(token) < SEALED_OVERHEAD and not (plain and self._plain):
            # Checked before the version: a few stray bytes are no token of another release.
            hint = ": a seat token?" if len(token) == SEAT_TOKEN_BYTES else ""
            raise TokenError("TOKEN_MALFORMED", f"state token is too short{hint}")
        if plain and not self._plain:
            # Before the version, which a plain token's first byte holds too.
            raise TokenError(
                "TOKEN_PLAIN_DISABLED", "plain state tokens are disabled on this server"
            )
        if version != self._version:
            if version > self._version and not plain:
                self._refuse_newer(token, version)
            raise TokenError(
                "TOKEN_SCHEMA_UNSUPPORTED",
                f"state token schema version {version} is not supported "
                f"(this server reads version {self._version})",
                version=str(version),
            )
        if plain:
            return token[1:]
        return self._decrypt(token, self._associated)

    def _decrypt(self, token: bytes, associated: bytes) -> bytes:
        aead = self._aeads.get(token[1 : 1 + KEY_ID_BYTES])
        if aead is None:
            raise TokenError(
                "TOKEN_UNKNOWN_KEY",
                f"state token was sealed with a key this server does not have"
                f"{self._unknown_key_cause}",
                key_id=token[1 : 1 + KEY_ID_BYTES].hex(),
            )
        nonce_end = 1 + KEY_ID_BYTES + NONCE_BYTES
        try:
            return aead.decrypt(token[1 + KEY_ID_BYTES : nonce_end], token[nonce_end:], associated)
        except InvalidTag:
            raise TokenError(
                "TOKEN_INVALID",
                "state token failed authentication (altered, truncated, or of another game type)",
            ) from None

    def _refuse_newer(self, token: bytes, version: int) -> NoReturn:
        """Only a token that authenticates as ``version`` is from a newer release: forged
        bytes must not pass for one, as that answer asks the caller to retry."""
        self._decrypt(token, self._associated_prefix + bytes([version]))
        raise TokenError(
            NEWER_RELEASE,
            f"state token schema version {version} is from a newer release of this service "
            f"(this server reads version {self._version}); another replica may read it",
            version=str(version),
        )


class SeatTokens:
    """Issues and verifies seat tokens: HMAC of game id and seat (design section 4)."""

    def __init__(self, keys: KeyRing) -> None:
        # A keyed HMAC object per key, copied per use: the key schedule runs once
        # (cheaper than the one-shot ``hmac.digest``, which redoes it every call).
        self._macs = {
            KeyRing.key_id(key): hmac.new(_seat_key(key), digestmod="sha256") for key in keys.keys
        }
        self._primary_id = KeyRing.key_id(keys.keys[0])
        # Why a token of a seat token's form is under no key of the ring. A server that
        # made its key up at start lost the old one on restart: no key retired, and the
        # token may well be one this service issued (also on a plain-state server, whose
        # state tokens outlive the restart while its seat tokens do not).
        self._unknown_key_cause = (
            "this server made its key up at start (no CARDRULES_STATE_KEYS), so seat tokens "
            "from before a restart or from another server cannot be verified"
            if keys.is_ephemeral
            else "one retired too soon, or no seat token of this service"
        )
        # A player sends the same seat token with every move of a game, so the
        # MACs of recent (key id, game id, seat) triples are kept, not recomputed:
        # a pure function of its arguments. Only the expected MAC is cached: the token
        # sent is still compared in constant time, so how long a refusal takes does not
        # tell a forger how many leading bytes of a guessed MAC were right.
        self._expected = functools.lru_cache(maxsize=SEAT_MAC_CACHE_SIZE)(self._mac)

    def issue(self, game_id: str, seat: int) -> bytes:
        """The token that lets its holder act for ``seat`` in ``game_id``, under the primary key."""
        if not 0 <= seat <= _MAX_SEAT:
            raise ValueError(f"seat must be 0..{_MAX_SEAT}, not {seat}")
        return self._primary_id + self._expected(self._primary_id, game_id, seat)

    def verify(self, game_id: str, seat: int, token: bytes, players: int = 0) -> None:
        """Accept a token made for this game and seat with any key of the ring, else raise.

        A wrong token that is this game's token of another of its ``players`` seats
        is refused naming that seat (metadata ``token_seat``): the caller holds the
        token, so that tells nothing it could not learn by trying each seat.
        """
        if not token:
            raise SeatTokenError("SEAT_TOKEN_MISSING", f"seat {seat} needs its seat token")
        key_id = token[:KEY_ID_BYTES]
        if len(token) == SEAT_TOKEN_BYTES and key_id not in self._macs:
            # The key id tells a key retired while games still held tokens under it
            # (an operator's fault) from a wrong token of a known key.
            raise SeatTokenError(
                "SEAT_TOKEN_INVALID",
                f"the seat token of seat {seat} is under no key of this server: "
                f"{self._unknown_key_cause}",
                key_id=key_id.hex(),
            )
        if not (
            len(token) == SEAT_TOKEN_BYTES
            and 0 <= seat <= _MAX_SEAT
            and hmac.compare_digest(token[KEY_ID_BYTES:], self._expected(key_id, game_id, seat))
        ):
            raise self._wrong_token(game_id, seat, token, players)

    def seat_of(self, game_id: str, token: bytes, players: int) -> int | None:
        """The seat of ``game_id``'s ``players`` whose token ``token`` is, under any key of
        the ring, else None (design section 4): for refusals that name the seat of a token
        sent with no seat or the wrong one (up to ``players`` MACs, on refusals only).

        Its holder has the token, so naming its seat tells nothing it could not learn by
        trying each seat."""
        key_id, mac = token[:KEY_ID_BYTES], token[KEY_ID_BYTES:]
        if len(token) != SEAT_TOKEN_BYTES or key_id not in self._macs:
            return None
        for seat in range(min(players, _MAX_SEAT + 1)):
            if hmac.compare_digest(mac, self._expected(key_id, game_id, seat)):
                return seat
        return None

    def _wrong_token(self, game_id: str, seat: int, token: bytes, players: int) -> SeatTokenError:
        """The refusal of a token that is not ``seat``'s, saying whose it is if it is one of
        this game's (``seat_of``, metadata ``token_seat``), and that it is none of them if
        it is a seat token under a key of this server that no seat of the game has
        (metadata ``token_game`` ``"other"``: most likely one of another game)."""
        message = f"not a valid seat token for seat {seat}"
        # Never ``seat`` itself: its MAC, the same one, has just failed to match.
        other = self.seat_of(game_id, token, players)
        if other is None:
            if players > 0 and len(token) == SEAT_TOKEN_BYTES:
                # Its key is this server's (``verify`` names an unknown one first), so the
                # usual cause is a client that started a new game and kept the old tokens;
                # ``token_game`` says so beside the message, for clients that word it.
                return SeatTokenError(
                    "SEAT_TOKEN_INVALID",
                    f"{message}; it is no seat's token of this game (one from another game?)",
                    token_game="other",
                )
            return SeatTokenError("SEAT_TOKEN_INVALID", message)
        return SeatTokenError(
            "SEAT_TOKEN_INVALID", f"{message}; it is seat {other}'s token", token_seat=str(other)
        )

    def renewal(self, game_id: str, seat: int, token: bytes) -> bytes | None:
        """The seat's token under the primary key if ``token`` (verified) is under another.

        Seat tokens are never sealed again by play, unlike state tokens: without
        this, a game would break once the key of its ``NewGame`` left the ring.
        """
        if token[:KEY_ID_BYTES] == self._primary_id:
            return None
        return self.issue(game_id, seat)

    def _mac(self, key_id: bytes, game_id: str, seat: int) -> bytes:
        # Length-prefixed so that no two (game id, seat) pairs share an encoding;
        # surrogatepass so that no str makes verify raise anything but SeatTokenError.
        game = game_id.encode("utf-8", "surrogatepass")
        mac = self._macs[key_id].copy()
        mac.update(len(game).to_bytes(4, "big") + game + seat.to_bytes(4, "big"))
        return mac.digest()[:SEAT_MAC_BYTES]


def _seat_key(key: bytes) -> bytes:
    """The seat-token key derived from a state key, so neither use weakens the other."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=SEAT_KEY_INFO).derive(key)
