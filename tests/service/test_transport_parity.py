"""The same request answers alike over gRPC and over HTTP/JSON (docs/api.md, "HTTP/JSON"
and "Errors"; design sections 3 and 5): a seeded guard against drift between the two
transports of one real server.

From a fixed seed, every request goes once over each transport, with the same
``x-request-id`` (over HTTP in one of the JSON spellings the gateway reads): a few games with random rule flags (K16), team modes (K3.2), first
dealers or draws for the deal (K4.2) and tie rules (K13.2), played with random legal
moves to their end and past it, with hostile variations mixed in (state tokens
truncated, bit-flipped, zeroed or of another game; seat tokens missing, mangled, of
another seat or game; moves out of turn, of a card not in hand, captures invalid,
non-maximal or of cards not on the table, a crawl where a capture is forced, a seat
outside the game, enum numbers the proto does not define); and requests refused before
any game (empty requests of every method, invalid configurations, decks and draws).
For each pair:

- a refusal's HTTP status is the one docs/api.md gives its gRPC code, or its reason
  when the document gives that reason a status of its own, read from the document
  rather than from ``service.errors`` so that the two cannot drift together; and both
  transports carry the same ``google.rpc.Status``: code, message, ``ErrorInfo`` (reason,
  domain, metadata) and ``BadRequest`` violations (field paths and descriptions),
  compared unpacked;
- an answer's JSON is ``MessageToDict(grpc_answer,
  always_print_fields_with_no_presence=True)`` but for what is random: a sealed state
  token's nonce and ciphertext (its version, key id and length must agree), and a new
  game's id, its seat tokens' MACs and its ``stateId``, which the id decides;
- both echo the request id.

Size: ``PAIRS`` request pairs, 300 by default (about a second), which the suite's
``FUZZ_SCALE`` multiplies (tests/sizes.py; README, "Contributing"); a game under way
when they are spent is played to its end. The requests follow from ``SEED`` alone
(only the tokens' random bytes vary between runs, and no choice depends on them), so a
failure names a request that recurs on every run.
"""

from __future__ import annotations

import base64
import http.client
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import google.rpc.error_details_pb2 as error_details_pb2
import google.rpc.status_pb2 as status_pb2
import grpc
from cardrules.cards.v1 import cards_pb2
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf import json_format
from google.protobuf.message import Message
from grpc_status import rpc_status

from engine.krypkasino import Config, ConfigError, Removal, Rules, Teams, TieRule
from tests.service.grpc_helpers import KEY_ID_BYTES, NONCE_BYTES, TIMEOUT
from tests.service.server_process import ServerProcess
from tests.sizes import fuzz_examples

# Its games (four) meet every refusal of a move the variations aim at: the assertions at
# the tests' ends say what a new seed must reach.
SEED = 20_250_356
PAIRS = fuzz_examples(300)
# Of the pairs, those spent on requests refused before any game; the games take the rest.
BEFORE_A_GAME = PAIRS // 6
# How often a move of a game is preceded by two hostile variations on its position.
HOSTILE_RATE = 0.2
# How often a move is played over both transports (else over gRPC alone), and half as
# often its legal moves asked over both: what every move asks, compared often enough,
# leaving pairs for more games and variations.
ROUTINE_PAIRED = 0.5

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
SERVICE = "cardrules.krypkasino.v1.KrypkasinoService"
JsonObject = dict[str, Any]
EnumT = TypeVar("EnumT", bound=int)


@dataclass(frozen=True)
class Method:
    """An RPC, its HTTP/JSON route (docs/api.md, "HTTP/JSON") and its answer's type."""

    name: str
    route: str
    response: type[Message]


METHODS = {
    method.name: method
    for method in (
        Method("NewGame", "newGame", pb.NewGameResponse),
        Method("LegalMoves", "legalMoves", pb.LegalMovesResponse),
        Method("Play", "play", pb.PlayResponse),
        Method("Score", "score", pb.ScoreResponse),
        Method("GetView", "getView", pb.GetViewResponse),
    )
}


# -- the HTTP status the document gives a refusal ---------------------------------------


def _without_parentheses(text: str) -> str:
    """``text`` without its parenthesised asides, nested ones too."""
    while (shorter := re.sub(r"\([^()]*\)", "", text)) != text:
        text = shorter
    return text


def _statuses_named(text: str) -> dict[str, int]:
    """``400 for `A` and `B`, 403 `C```: each backquoted name with the status before it."""
    named: dict[str, int] = {}
    status = 0
    for match in re.finditer(r"\b(\d{3})\b|`([A-Z_]+)`", text):
        if match[1]:
            status = int(match[1])
        else:
            assert status, f"{match[2]} comes before any status in {text!r}"
            named[match[2]] = status
    return named


def _gateway_table(document: str) -> dict[str, int]:
    """The HTTP column of "Errors"' table of the refusals the gateway itself makes."""
    table = document.split("Over HTTP a few refusals come from the gateway itself:", 1)[1]
    rows = table.strip().split("\n\n", 1)[0].splitlines()[2:]  # after the header rows
    statuses = {}
    for row in rows:
        _, reason, status, _ = (cell.strip() for cell in row.split("|")[1:5])
        statuses[reason.strip("`")] = int(status)
    return statuses


@dataclass(frozen=True)
class DocumentedStatuses:
    """docs/api.md's HTTP status of a refusal: its code's ("HTTP/JSON", Errors: "the
    standard HTTP status of the code"), unless its reason has one of its own ("a more
    precise status than their code's", and the HTTP column of the gateway's table)."""

    by_code: dict[str, int]
    by_reason: dict[str, int]

    @classmethod
    def read(cls) -> DocumentedStatuses:
        document = API_DOC.read_text(encoding="utf-8")
        prose = document.split("with the standard HTTP status of", 1)[1]
        prose = " ".join(prose.split("are in the second table", 1)[0].split())
        of_codes, of_reasons = _without_parentheses(prose).split("a more precise status", 1)
        by_code, precise = _statuses_named(of_codes), _statuses_named(of_reasons)
        by_reason = _gateway_table(document)
        # The prose and the table must say the same of the reasons both name.
        assert precise.items() <= by_reason.items(), (precise, by_reason)
        assert {"INVALID_ARGUMENT", "FAILED_PRECONDITION", "PERMISSION_DENIED"} <= set(by_code)
        return cls(by_code, by_reason)

    def of(self, status: status_pb2.Status) -> int:
        code = code_name(status.code)
        assert code in self.by_code, f"docs/api.md gives {code} no HTTP status"
        return self.by_reason.get(error_info(status).reason, self.by_code[code])


def code_name(code: int) -> str:
    """The name of a ``google.rpc.Code`` number, as docs/api.md writes it."""
    (name,) = (c.name for c in grpc.StatusCode if c.value[0] == code)
    return name


# -- refusals, unpacked -----------------------------------------------------------------


def error_info(status: status_pb2.Status) -> error_details_pb2.ErrorInfo:
    """The refusal's one ``ErrorInfo`` (docs/api.md, "Errors": exactly one)."""
    infos = [d for d in status.details if d.TypeName() == "google.rpc.ErrorInfo"]
    assert len(infos) == 1, status
    info = error_details_pb2.ErrorInfo()
    infos[0].Unpack(info)
    return info


def bad_requests(status: status_pb2.Status) -> list[error_details_pb2.BadRequest]:
    found = []
    for detail in status.details:
        if detail.TypeName() == "google.rpc.BadRequest":
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
            found.append(bad_request)
    return found


def refusal_summary(status: status_pb2.Status) -> JsonObject:
    """What both transports must agree on, unpacked rather than as ``Any`` bytes: how a
    detail is serialized is no difference, and a failure shows the fields that differ."""
    info = error_info(status)
    return {
        "code": code_name(status.code),
        "message": status.message,
        "reason": info.reason,
        "domain": info.domain,
        "metadata": dict(info.metadata),
        "violations": [
            [(v.field, v.description) for v in bad_request.field_violations]
            for bad_request in bad_requests(status)
        ],
        "details": [detail.TypeName() for detail in status.details],
    }


# -- what is random in an answer --------------------------------------------------------


def sealed_shape(token: str) -> str:
    """A sealed state token without its random nonce and ciphertext: its version, key id
    and length (design section 4: ``version | key id | nonce | AES-256-GCM(payload)``)."""
    raw = base64.b64decode(token, validate=True)
    assert len(raw) > 1 + KEY_ID_BYTES + NONCE_BYTES, token
    return f"<sealed v{raw[0]}, key {raw[1 : 1 + KEY_ID_BYTES].hex()}, {len(raw)} bytes>"


def seat_token_shape(token: str) -> str:
    """A seat token without its MAC, which a new game's random id decides."""
    raw = base64.b64decode(token, validate=True)
    return f"<seat token, key {raw[:KEY_ID_BYTES].hex()}, {len(raw)} bytes>"


def masked(body: JsonObject, new_game: bool) -> JsonObject:
    """``body`` with its random parts replaced by what must still agree about them: the
    ``state`` token; for a new game also its id (32 hex digits, a ``uuid4``), its seat
    tokens and its view's ``stateId`` (16 hex digits of a hash of a state that holds the
    id). Every other part of an answer follows from the request."""
    out = dict(body)
    if "state" in out:
        out["state"] = sealed_shape(out["state"])
    if new_game:
        view = out["view"] = dict(out["view"])
        assert re.fullmatch(r"[0-9a-f]{32}", out["gameId"]) and view["gameId"] == out["gameId"]
        assert re.fullmatch(r"[0-9a-f]{16}", view["stateId"]), view["stateId"]
        out["gameId"] = view["gameId"] = "<game id>"
        view["stateId"] = "<state id>"
        out["seatTokens"] = [seat_token_shape(token) for token in out["seatTokens"]]
    return out


def first_difference(grpc_json: Any, http_json: Any, path: str = "") -> str:
    """Where two JSON values first differ: a failure message shorter than both."""
    if isinstance(grpc_json, dict) and isinstance(http_json, dict):
        for key in sorted(set(grpc_json) | set(http_json)):
            a, b = grpc_json.get(key, "<absent>"), http_json.get(key, "<absent>")
            if a != b:
                return first_difference(a, b, f"{path}.{key}")
    if (
        isinstance(grpc_json, list)
        and isinstance(http_json, list)
        and len(grpc_json) == len(http_json)
    ):
        for i, (a, b) in enumerate(zip(grpc_json, http_json, strict=True)):
            if a != b:
                return first_difference(a, b, f"{path}[{i}]")
    return f"{path or '.'}: gRPC {grpc_json!r:.300} but HTTP {http_json!r:.300}"


# -- the two transports -----------------------------------------------------------------


@dataclass
class GrpcAnswer:
    response: Message | None
    status: status_pb2.Status | None  # of a refusal
    request_id: str | None


@dataclass
class HttpAnswer:
    status: int
    body: JsonObject
    request_id: str | None


def _request_id(metadata: Any) -> str | None:
    values = [value for key, value in metadata or () if key == "x-request-id"]
    return str(values[0]) if values else None


class Transports:
    """A gRPC channel that sends raw bytes, so that a request need not be a message (an
    empty one), and a kept-alive HTTP/1.1 connection, to the same server."""

    def __init__(self, server: ServerProcess) -> None:
        self.channel = grpc.insecure_channel(server.target)
        self.calls: dict[str, grpc.UnaryUnaryMultiCallable[bytes, bytes]] = {
            name: self.channel.unary_unary(f"/{SERVICE}/{name}") for name in METHODS
        }
        self.connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=TIMEOUT)

    def close(self) -> None:
        self.connection.close()
        self.channel.close()

    def grpc(self, method: str, request: bytes, request_id: str) -> GrpcAnswer:
        metadata = (("x-request-id", request_id),)
        try:
            raw, call = self.calls[method].with_call(request, timeout=TIMEOUT, metadata=metadata)
        except grpc.RpcError as error:
            failed = cast(grpc.Call, error)  # every error a stub raises is also the call
            status = rpc_status.from_call(failed)
            assert status is not None, f"{failed.code()} without a google.rpc.Status"
            assert status.code == failed.code().value[0], status  # the trailer's, the call's
            return GrpcAnswer(None, status, _request_id(failed.trailing_metadata()))
        response = METHODS[method].response.FromString(raw)
        return GrpcAnswer(response, None, _request_id(call.trailing_metadata()))

    def http(self, method: str, body: bytes, request_id: str) -> HttpAnswer:
        headers = {"Content-Type": "application/json", "X-Request-Id": request_id}
        self.connection.request("POST", f"/v1/krypkasino:{METHODS[method].route}", body, headers)
        answer = self.connection.getresponse()
        data = answer.read()
        if answer.getheader("Connection", "").lower() == "close":
            self.connection.close()  # http.client opens a new one for the next request
        return HttpAnswer(answer.status, json.loads(data), answer.getheader("X-Request-Id"))


# -- pairs ------------------------------------------------------------------------------


@dataclass
class Pair:
    """The two answers to one request, which agreed."""

    grpc: GrpcAnswer
    http: HttpAnswer

    @property
    def response(self) -> Message | None:
        return self.grpc.response

    @property
    def reason(self) -> str | None:
        return None if self.grpc.status is None else error_info(self.grpc.status).reason


def json_body(request: Message, rng: random.Random) -> bytes:
    """The request as proto3 JSON in one of the spellings the gateway reads (docs/api.md,
    "HTTP/JSON"): JSON or proto field names, enums by name or number, bytes as base64 or
    as base64url without padding."""
    body = json_format.MessageToDict(
        request,
        preserving_proto_field_name=rng.random() < 0.3,
        use_integers_for_enums=rng.random() < 0.2,
    )
    if rng.random() < 0.3:
        for name in ("state", "seatToken", "seat_token"):
            if isinstance(body.get(name), str):
                body[name] = body[name].replace("+", "-").replace("/", "_").rstrip("=")
    return json.dumps(body).encode()


class Pairs:
    """Sends requests over both transports and asserts that each pair of answers agrees;
    counts the pairs and the reasons of the refusals among them."""

    def __init__(self, server: ServerProcess, rng: random.Random, tag: str) -> None:
        self.transports = Transports(server)
        self.statuses = DocumentedStatuses.read()
        self.rng = rng
        self.tag = tag
        self.count = 0
        self.reasons: Counter[str] = Counter()

    def send(self, method: str, request: Message, label: str) -> Pair:
        """``request`` over both transports; its answers, once checked."""
        return self._exchange(
            method, request.SerializeToString(), json_body(request, self.rng), label
        )

    def send_empty(self, method: str) -> Pair:
        """No bytes over gRPC, which is the empty message; over HTTP no body or ``{}``,
        which the gateway takes as the same (docs/api.md, "HTTP/JSON")."""
        return self._exchange(method, b"", self.rng.choice([b"", b"{}"]), "empty")

    def grpc_only(self, method: str, request: Message) -> Message:
        """The answer to ``request`` over gRPC alone (a routine call, not a pair)."""
        answer = self.transports.grpc(method, request.SerializeToString(), f"{self.tag}-grpc")
        assert answer.response is not None, answer.status
        return answer.response

    def close(self) -> None:
        self.transports.close()

    def _exchange(self, method: str, grpc_bytes: bytes, body: bytes, label: str) -> Pair:
        self.count += 1
        request_id = f"{self.tag}-{self.count}"
        pair = Pair(
            self.transports.grpc(method, grpc_bytes, request_id),
            self.transports.http(method, body, request_id),
        )
        context = f"{method}, {label} (request {request_id}: {body[:600]!r})"
        assert (pair.grpc.request_id, pair.http.request_id) == (request_id, request_id), context
        if pair.grpc.status is None:
            self._check_answers(method, pair, context)
        else:
            self._check_refusals(pair.grpc.status, pair.http, context)
            self.reasons[str(pair.reason)] += 1
        return pair

    def _check_answers(self, method: str, pair: Pair, context: str) -> None:
        assert pair.http.status == 200, f"{context}: gRPC answered, HTTP {pair.http.body}"
        assert pair.grpc.response is not None
        expected = json_format.MessageToDict(
            pair.grpc.response, always_print_fields_with_no_presence=True
        )
        new_game = method == "NewGame"
        wanted, got = masked(expected, new_game), masked(pair.http.body, new_game)
        assert got == wanted, f"{context}: {first_difference(wanted, got)}"

    def _check_refusals(
        self, grpc_status: status_pb2.Status, answer: HttpAnswer, context: str
    ) -> None:
        summary = refusal_summary(grpc_status)
        assert answer.status != 200, f"{context}: HTTP answered, gRPC refused: {summary}"
        assert set(answer.body) <= {"code", "message", "details"}, f"{context}: {answer.body}"
        http_status = json_format.ParseDict(answer.body, status_pb2.Status())
        assert refusal_summary(http_status) == summary, context
        documented = self.statuses.of(grpc_status)
        assert answer.status == documented, f"{context}: {summary}; docs/api.md: {documented}"


@contextmanager
def pairs_to(server: ServerProcess, seed: int, tag: str) -> Iterator[Pairs]:
    pairs = Pairs(server, random.Random(seed), tag)
    try:
        yield pairs
    finally:
        pairs.close()


# -- requests ---------------------------------------------------------------------------

RANKS = range(1, 14)
SUITS = range(1, 5)


def card(rank: int, suit: int) -> cards_pb2.Card:
    """A card of any rank and suit numbers, defined or not (proto3 enums are open)."""
    return cards_pb2.Card(
        rank=cast(cards_pb2.Rank.ValueType, rank), suit=cast(cards_pb2.Suit.ValueType, suit)
    )


def full_deck(copies: int) -> list[cards_pb2.Card]:
    return [card(rank, suit) for _ in range(copies) for suit in SUITS for rank in RANKS]


def short_config(rng: random.Random) -> Config:
    """A valid configuration of random flags (K16), team mode (K3.2), first dealer or draw
    for the deal (K4.2) and tie rule (K13.2), whose match ends after one deal (a target
    score, capped at one deal: K13.2) and three times in four with one deck (K16.3): games
    short enough to play to their end in CI. A draw ``Config.validate`` refuses is drawn
    again."""
    while True:
        players = rng.randint(2, 6)
        flags = {name: rng.random() < 1 / 3 for name in Rules.flag_names()}
        flags["single_deck"] = rng.random() < 3 / 4
        teams = [Teams.INDIVIDUAL]
        teams += [Teams.PAIRS] if players in (4, 6) else []
        teams += [Teams.TRIOS] if players == 6 else []
        draw = rng.random() < 1 / 4
        config = Config(
            players,
            rng.choice(teams),
            Rules(removal=rng.choice(list(Removal)), **flags),
            first_dealer=0 if draw else rng.randrange(players),
            draw_for_deal=draw,
            match_deals=1,
            target_score=rng.randint(1, 60),
            tie_rule=rng.choice(list(TieRule)),
        )
        try:
            return config.validate()
        except ConfigError:
            continue


def sometimes_unspecified(value: EnumT, default: bool, rng: random.Random) -> EnumT:
    """``value``; when it is the default rule, half the time ``*_UNSPECIFIED`` (0), which
    means the same."""
    return cast(EnumT, 0) if default and rng.random() < 0.5 else value


def config_proto(config: Config, rng: random.Random) -> pb.GameConfig:
    """The request's ``GameConfig`` of an engine config, built here rather than by
    ``service.codec``, whose reading of it both transports share."""
    rules = config.rules
    teams = pb.TeamMode.Value(f"TEAM_MODE_{config.teams.name}")
    removal = pb.Removal.Value(f"REMOVAL_{rules.removal.name}")
    tie_rule = pb.TieRule.Value(f"TIE_RULE_{config.tie_rule.name}")
    return pb.GameConfig(
        players=config.players,
        teams=sometimes_unspecified(teams, config.teams is Teams.INDIVIDUAL, rng),
        rules=pb.Rules(
            removal=sometimes_unspecified(removal, rules.removal is Removal.COURTS, rng),
            **{name: getattr(rules, name) for name in Rules.flag_names()},
        ),
        first_dealer=config.first_dealer,
        draw_for_deal=config.draw_for_deal,
        match_deals=config.match_deals,
        target_score=config.target_score,
        tie_rule=sometimes_unspecified(tie_rule, config.tie_rule is TieRule.SHARED, rng),
    )


def new_game(config: Config, rng: random.Random) -> pb.NewGameRequest:
    """A ``NewGame`` whose deal follows from the request, as the two calls must deal
    alike: a seed, or an explicit deck without a draw for the deal (K4.2, K5)."""
    request = pb.NewGameRequest(config=config_proto(config, rng))
    if config.draw_for_deal or rng.random() < 0.8:
        request.seed = rng.choice([rng.randrange(2**64), rng.randrange(1000), 0, 2**64 - 1])
    if not request.HasField("seed") or rng.random() < 0.2:
        cards = full_deck(config.copies)
        rng.shuffle(cards)
        request.decks.add(cards=cards)
    return request


INVALID_NEW_GAMES = 15


def invalid_new_game(choice: int, rng: random.Random) -> pb.NewGameRequest:
    """A ``NewGame`` that a rule or the proto forbids, in the way ``choice`` (modulo
    ``INVALID_NEW_GAMES``) picks: its configuration (K3, K4.2, K13.2, K16, enum numbers
    the proto does not define), its deck (K2) or its draw for the deal (K4.2)."""
    request = new_game(short_config(rng), rng)
    c = request.config
    choice %= INVALID_NEW_GAMES
    if choice == 0:
        c.players = rng.choice([0, 1, 7, -1, 2**31 - 1, -(2**31)])
    elif choice == 1:
        c.players, c.rules.single_deck = 5, True
    elif choice == 2:
        c.rules.two_player_five_six, c.rules.four_four = True, rng.random() < 0.5
    elif choice == 3:
        c.teams = cast(pb.TeamMode.ValueType, rng.choice([2, 3, 4, 99, -1]))
        c.players = rng.choice([2, 3, 5])
    elif choice == 4:
        c.draw_for_deal, c.first_dealer = False, rng.choice([-1, c.players, 2**31 - 1])
    elif choice == 5:
        c.draw_for_deal, c.first_dealer = True, 1
    elif choice == 6:
        c.ClearField("target_score")
        c.match_deals = rng.choice([0, -1, c.players + 1, 241])
    elif choice == 7:
        c.ClearField("match_deals")
        c.target_score = rng.choice([0, -5, 481])
    elif choice == 8:
        c.rules.removal = cast(pb.Removal.ValueType, rng.choice([4, 99, -1]))
    elif choice == 9:
        c.tie_rule = cast(pb.TieRule.ValueType, rng.choice([3, 100, -7]))
    elif choice in (10, 11):
        # A card missing and another twice too often, or of a rank the proto lacks.
        deck = full_deck(1 if c.rules.single_deck else 2)
        deck[rng.randrange(len(deck))] = (
            card(1, 1) if choice == 10 else card(rng.choice([0, 14]), 1)
        )
        del request.decks[:]
        request.decks.add(cards=deck)
    else:
        # A draw for the deal without draw_for_deal, one that runs out before it decides
        # (one card), or one holding a card more often than the decks do.
        c.draw_for_deal, c.first_dealer = choice != 12, 0
        drawn = [card(1, 1)] * (1 if choice < 14 else 3) + full_deck(1)[1:4]
        request.draw.cards.extend(drawn[: 1 if choice == 13 else 4])
        request.seed = rng.randrange(1000)
    return request


def mutated(token: bytes, rng: random.Random) -> bytes:
    """``token`` truncated, with a bit flipped, extended, zeroed, or another first byte."""
    choice = rng.randrange(5)
    if choice == 0:
        return token[: rng.randrange(len(token))]
    if choice == 1:
        i = rng.randrange(len(token))
        return token[:i] + bytes([token[i] ^ 1 << rng.randrange(8)]) + token[i + 1 :]
    if choice == 2:
        return token + bytes(rng.randint(1, 4))
    if choice == 3:
        return bytes(len(token))
    return bytes([rng.randrange(256)]) + token[1:]


# -- games ------------------------------------------------------------------------------


class Game:
    """A game played over both transports from ``rng``: random legal moves to its end,
    and hostile variations on the positions it passes."""

    def __init__(self, pairs: Pairs, rng: random.Random, foreign: pb.NewGameResponse) -> None:
        self.pairs, self.rng, self.foreign = pairs, rng, foreign
        config = short_config(rng)
        self.players = config.players
        started = pairs.send("NewGame", new_game(config, rng), "a game").response
        assert isinstance(started, pb.NewGameResponse), "a valid configuration was refused"
        self.state, self.tokens, self.view = started.state, list(started.seat_tokens), started.view

    def request(
        self, method: str, seat: int, token: bytes, move: pb.Move, state: bytes | None = None
    ) -> Message:
        """A request of ``method`` by ``seat`` on this game's state (or on ``state``)."""
        state = self.state if state is None else state
        if method == "LegalMoves":
            return pb.LegalMovesRequest(state=state, seat=seat, seat_token=token)
        if method == "GetView":
            return pb.GetViewRequest(state=state, seat=seat, seat_token=token)
        if method == "Score":
            return pb.ScoreRequest(state=state)
        return pb.PlayRequest(state=state, seat=seat, seat_token=token, move=move)

    def play(
        self, seat: int, played: cards_pb2.Card, captures: list[cards_pb2.Card]
    ) -> pb.PlayRequest:
        """``seat`` plays ``played`` capturing ``captures``, with its own seat token."""
        move = pb.Move(card=played, captures=captures)
        return pb.PlayRequest(state=self.state, seat=seat, seat_token=self.tokens[seat], move=move)

    def hand(self, seat: int) -> list[cards_pb2.Card]:
        """The seat's hand, from its view (a pair too)."""
        request = pb.GetViewRequest(state=self.state, seat=seat, seat_token=self.tokens[seat])
        shown = self.pairs.send("GetView", request, "a hand").response
        assert isinstance(shown, pb.GetViewResponse)
        return list(shown.view.hand)

    def play_to_the_end(self) -> None:
        while not self.view.game_over:
            self.step()
        self.after_the_end()

    def step(self) -> None:
        """One move: the seat to move asks for its legal moves and plays one (K7.7), after
        hostile variations now and then; the game goes on from either answer's state."""
        seat = self.view.turn
        asking = pb.LegalMovesRequest(state=self.state, seat=seat, seat_token=self.tokens[seat])
        if self.rng.random() < ROUTINE_PAIRED / 2:
            asked = self.pairs.send("LegalMoves", asking, "the turn's legal moves").response
        else:
            asked = self.pairs.grpc_only("LegalMoves", asking)
        assert isinstance(asked, pb.LegalMovesResponse)
        moves = [legal.move for legal in asked.moves]
        assert moves, f"no legal move for seat {seat} (K7.7)"
        if self.rng.random() < HOSTILE_RATE:
            for variation in self.rng.sample(VARIATIONS, 2):
                variation(self, seat, moves)
        move = self.rng.choice(moves)
        captures = list(move.captures)
        self.rng.shuffle(captures)  # in any order: the captured cards are a multiset
        playing = self.play(seat, move.card, captures)
        http_state = None
        if self.rng.random() < ROUTINE_PAIRED:
            pair = self.pairs.send("Play", playing, "a legal move")
            played = pair.response
            http_state = base64.b64decode(pair.http.body["state"])
        else:
            played = self.pairs.grpc_only("Play", playing)
        assert isinstance(played, pb.PlayResponse)
        # Half the time the game goes on over both transports from the state the HTTP
        # answer sealed.
        self.state = http_state if http_state and self.rng.random() < 0.5 else played.state
        self.view = played.view
        if self.rng.random() < 0.05:
            self.pairs.send("Score", pb.ScoreRequest(state=self.state), "a score")

    def after_the_end(self) -> None:
        """K13.2: a finished match still answers reads, and refuses moves ``GAME_OVER``."""
        seat = self.rng.randrange(self.players)
        token = self.tokens[seat]
        self.pairs.send("Score", pb.ScoreRequest(state=self.state), "the final score")
        self.pairs.send("GetView", pb.GetViewRequest(state=self.state), "the last view")
        self.pairs.send("GetView", self.request("GetView", seat, token, pb.Move()), "over")
        self.pairs.send("LegalMoves", self.request("LegalMoves", seat, token, pb.Move()), "over")
        refused = self.pairs.send("Play", self.play(seat, card(1, 1), []), "a move after the end")
        assert refused.reason == "GAME_OVER", refused.reason


Variation = Callable[[Game, int, list[pb.Move]], None]


def out_of_turn(game: Game, seat: int, moves: list[pb.Move]) -> None:
    """Another seat plays a card of its own hand (K4.4)."""
    other = (seat + game.rng.randrange(1, game.players)) % game.players
    held = game.hand(other)
    played = game.rng.choice(held) if held else moves[0].card
    game.pairs.send("Play", game.play(other, played, []), "out of turn")


def not_in_hand(game: Game, seat: int, moves: list[pb.Move]) -> None:
    """A card the seat does not hold (K8.1)."""
    held = {(c.rank, c.suit) for c in game.hand(seat)}
    absent = [(rank, suit) for rank in RANKS for suit in SUITS if (rank, suit) not in held]
    game.pairs.send("Play", game.play(seat, card(*game.rng.choice(absent)), []), "not in hand")


def captures_not_on_table(game: Game, seat: int, moves: list[pb.Move]) -> None:
    """A capture of cards the table does not hold (K7.3)."""
    on_table = {(c.rank, c.suit) for c in game.view.table}
    off = [card(rank, suit) for rank in RANKS for suit in SUITS if (rank, suit) not in on_table]
    captured = game.rng.sample(off, game.rng.randint(1, 3))
    game.pairs.send("Play", game.play(seat, game.rng.choice(moves).card, captured), "off the table")


def random_capture(game: Game, seat: int, moves: list[pb.Move]) -> None:
    """Table cards taken at random: mostly a capture K7.2 forbids."""
    table = list(game.view.table)
    if table:
        captured = game.rng.sample(table, game.rng.randint(1, len(table)))
        game.pairs.send("Play", game.play(seat, game.rng.choice(moves).card, captured), "random")


def non_maximal(game: Game, seat: int, moves: list[pb.Move]) -> None:
    """A legal capture of several cards less one of them (K7.3)."""
    several = [move for move in moves if len(move.captures) >= 2]
    if several:
        move = game.rng.choice(several)
        captured = list(move.captures)
        captured.pop(game.rng.randrange(len(captured)))
        game.pairs.send("Play", game.play(seat, move.card, captured), "non-maximal")


def forced_crawl(game: Game, seat: int, moves: list[pb.Move]) -> None:
    """A card that captures played without its captures (K7.4, K7.6, K16.8)."""
    capturing = [move for move in moves if move.captures]
    if capturing:
        played = game.rng.choice(capturing).card
        game.pairs.send("Play", game.play(seat, played, []), "a crawl")


def seat_tokens(game: Game, seat: int, moves: list[pb.Move]) -> None:
    """Another seat's token, none, a mangled one, another game's (design section 4)."""
    rng, other = game.rng, (seat + game.rng.randrange(1, game.players)) % game.players
    foreign = game.foreign.seat_tokens
    for label, token in (
        ("another seat's token", game.tokens[other]),
        ("no seat token", b""),
        ("a mangled seat token", mutated(game.tokens[seat], rng)),
        ("another game's seat token", foreign[seat % len(foreign)]),
    ):
        method = rng.choice(["LegalMoves", "GetView", "Play"])
        game.pairs.send(method, game.request(method, seat, token, moves[0]), label)


def state_tokens(game: Game, seat: int, moves: list[pb.Move]) -> None:
    """A state token mangled, empty, a seat token, plain, or another game's (design
    section 4)."""
    rng, token = game.rng, game.tokens[seat]
    for label, state in (
        ("a mangled state", mutated(game.state, rng)),
        ("an odd state", rng.choice([b"", token, bytes([0x80]) + game.state[1:]])),
        ("another game's state", game.foreign.state),
    ):
        method = rng.choice(["LegalMoves", "GetView", "Play", "Score"])
        game.pairs.send(method, game.request(method, seat, token, moves[0], state), label)


def malformed_moves(game: Game, seat: int, moves: list[pb.Move]) -> None:
    """No move, enum numbers the proto does not define, a seat outside the game."""
    rng, token = game.rng, game.tokens[seat]
    no_move = pb.PlayRequest(state=game.state, seat=seat, seat_token=token)
    game.pairs.send("Play", no_move, "no move")
    undefined = card(rng.choice([0, 14, 99, -1]), rng.choice([1, 0, 5, -3]))
    captured = [card(rng.choice([1, 20]), rng.choice([0, 1, 9]))] if rng.random() < 0.5 else []
    game.pairs.send("Play", game.play(seat, undefined, captured), "undefined enum numbers")
    outside = rng.choice([game.players, -1, 99, 2**31 - 1, -(2**31)])
    method = rng.choice(["LegalMoves", "GetView", "Play"])
    game.pairs.send(method, game.request(method, outside, token, moves[0]), "a seat outside")


VARIATIONS: list[Variation] = [
    out_of_turn,
    not_in_hand,
    captures_not_on_table,
    random_capture,
    non_maximal,
    forced_crawl,
    seat_tokens,
    state_tokens,
    malformed_moves,
]


# -- the tests --------------------------------------------------------------------------


def test_refusals_before_any_game_answer_alike(server: ServerProcess) -> None:
    """Empty requests of every method (``STATE_MISSING``; a ``NewGame`` without players,
    ``CONFIG_INVALID``), then ``NewGame`` requests a rule or the proto forbids."""
    with pairs_to(server, SEED, "parity-refusals") as pairs:
        for method in METHODS:
            pairs.send_empty(method)
        while pairs.count < BEFORE_A_GAME:
            pairs.send("NewGame", invalid_new_game(pairs.count, pairs.rng), "refused")
        # What the seed reaches, lest a change of this test leave the refusals unguarded.
        assert {
            "STATE_MISSING",
            "CONFIG_INVALID",
            "FIELD_INVALID",
            "DECK_INVALID",
            "DRAW_INVALID",
            "DRAW_EXHAUSTED",
            "DRAW_WITHOUT_DRAW_FOR_DEAL",
        } <= set(pairs.reasons), pairs.reasons


def test_seeded_games_answer_alike_with_hostile_requests(server: ServerProcess) -> None:
    """Games to their end and past it, with hostile variations on their positions."""
    with pairs_to(server, SEED, "parity-games") as pairs:
        rng = pairs.rng
        foreign = pairs.send("NewGame", new_game(short_config(rng), rng), "a foreign game")
        assert isinstance(foreign.response, pb.NewGameResponse)
        games = 0
        while pairs.count < PAIRS - BEFORE_A_GAME:
            Game(pairs, random.Random(rng.randrange(2**32)), foreign.response).play_to_the_end()
            games += 1
        # What the seed reaches, lest a change of this test leave the refusals unguarded.
        assert games >= 3
        assert {
            "NOT_YOUR_TURN",
            "CARD_NOT_IN_HAND",
            "CAPTURE_NOT_ON_TABLE",
            "CAPTURE_NOT_VALID",
            "CAPTURE_NOT_MAXIMAL",
            "MUST_CAPTURE",
            "MUST_SWEEP",
            "GAME_OVER",
            "SEAT_TOKEN_INVALID",
            "SEAT_TOKEN_MISSING",
            "TOKEN_INVALID",
            "TOKEN_MALFORMED",
            "TOKEN_PLAIN_DISABLED",
            "FIELD_INVALID",
            "SEAT_INVALID",
            "MOVE_MISSING",
        } <= set(pairs.reasons), pairs.reasons
