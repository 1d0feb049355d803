"""The refusal reasons of the OpenAPI document: what a client generated from it learns.

``service.reasons.REFUSAL_REASONS`` lists every ``ErrorInfo`` reason with its code and
metadata keys, and the document lists them in ErrorInfo's ``reason`` description and
per error response, never as an ``enum`` (a generated client would then fail on a
reason a later release adds). These tests hold the list to docs/api.md's two error
tables, to the Python client's ``Reason`` and the engine's, and to what a real server
sends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cardrules.client
import pytest
from cardrules.cards.v1 import cards_pb2
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor

from engine.cards import Card, card_str, full_deck
from engine.krypkasino import Reason
from service.codec import card_from_proto, card_to_proto
from service.http_routes import routes
from service.openapi import COMMITTED, ERROR_RESPONSES, REASONS_BY_RPC, SERVICES
from service.reasons import REFUSAL_REASONS
from tests.service.http_helpers import exchange, refusal, rpc
from tests.service.server_process import ServerProcess

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
# A row of the document's list: - `REASON` (400 INVALID_ARGUMENT): `key`, `key`
LISTED = re.compile(r"^- `([A-Z_]+)` \((\d{3}) ([A-Z_]+)\)(?:: (.*))?$")


def error_tables() -> Iterator[tuple[str, str, str, str]]:
    """(code, reason, HTTP status or "", row text) of every reason of docs/api.md's two
    error tables (the gRPC one, whose rows of one code leave the code out after the
    first, then the HTTP gateway's), in their order."""
    section = API_DOC.read_text(encoding="utf-8").split("\n## Errors\n", 1)[1]
    for table in section.split("\n| Code")[1:3]:
        rows = [line for line in table.split("\n\n", 1)[0].splitlines() if line.startswith("| ")]
        code = ""
        for row in rows:
            cells = [cell.strip() for cell in row.split("|")[1:-1]]
            code = re.findall(r"`([A-Z_]+)`", cells[0])[0] if cells[0] else code
            http = cells[2] if len(cells) == 4 else ""
            # DEADLINE_EXCEEDED's reason cell says "(none)": no ErrorInfo over gRPC, but
            # over HTTP one of that reason ("refused 504 with this ErrorInfo").
            for reason in re.findall(r"`([A-Z_]+)`", cells[1]) or [code]:
                yield code, reason, http, row


def served_document(server: ServerProcess) -> Any:
    status, _, document = exchange(f"{server.http_url}/openapi.json", method="GET")
    assert status == 200
    return document


def listed_reasons(document: Any) -> dict[str, tuple[int, str, set[str]]]:
    """HTTP status, code and metadata keys by reason, read from ErrorInfo's ``reason``."""
    info = document["components"]["schemas"]["ErrorInfo"]["properties"]["reason"]
    assert "enum" not in info and info["type"] == "string"
    found = {}
    for line in info["description"].splitlines():
        if match := LISTED.match(line):
            reason, status, code, keys = match.groups()
            found[reason] = (int(status), code, set(re.findall(r"`([a-z_]+)`", keys or "")))
    return found


def test_the_reasons_are_those_of_the_docs_error_tables_with_their_codes():
    documented = list(error_tables())
    # REQUEST_MALFORMED and REQUEST_TOO_LARGE are in both tables, listed once.
    expected = dict.fromkeys(reason for _, reason, _, _ in documented)
    assert [r.reason for r in REFUSAL_REASONS] == list(expected)
    codes = {reason: code for code, reason, _, _ in documented}
    assert {r.reason: r.code.name for r in REFUSAL_REASONS} == codes
    # The gateway's table gives the HTTP status; the others take their code's.
    for _, reason, http, _ in documented:
        if http:
            (listed,) = (r for r in REFUSAL_REASONS if r.reason == reason)
            assert str(listed.http_status) == http, reason


def test_the_grpc_reasons_are_the_clients_in_its_order_and_include_the_engines():
    grpc_reasons = [r.reason for r in REFUSAL_REASONS if r.reason in set(cardrules.client.Reason)]
    assert grpc_reasons == [reason.value for reason in cardrules.client.Reason]
    moves = {r.reason for r in REFUSAL_REASONS if r.code.name == "FAILED_PRECONDITION"}
    assert moves == {reason.value for reason in Reason}


def test_each_metadata_key_is_one_the_docs_name_for_its_reason():
    rows: dict[str, str] = {}
    for _, reason, _, row in error_tables():
        rows[reason] = rows.get(reason, "") + row
    for listed in REFUSAL_REASONS:
        for key in listed.metadata:
            assert f"`{key}`" in rows.get(listed.reason, ""), (listed.reason, key)


def test_the_served_document_lists_every_reason_and_never_as_an_enum(server):
    """What a generated client shows beside ErrorInfo's ``reason``: each reason, its HTTP
    status and code and its metadata keys; and each error response names its reasons."""
    document = served_document(server)
    assert listed_reasons(document) == {
        r.reason: (r.http_status, r.code.name, set(r.metadata)) for r in REFUSAL_REASONS
    }
    info = document["components"]["schemas"]["ErrorInfo"]["properties"]["reason"]
    assert "later release may add reasons" in info["description"]
    statuses = {error.status for error in ERROR_RESPONSES}
    for name, response in document["components"]["responses"].items():
        for each in response_reasons(response):
            assert str(listed_status(each)) in statuses, (name, each)
    for name, operation in rpc_operations(document):
        for status, answer in operation["responses"].items():
            if status != "200":
                listed = response_reasons(resolved(document, answer))
                assert {str(listed_status(r)) for r in listed} == {status}, (name, status)


def response_reasons(response: Any) -> list[str]:
    """The reasons an error response's description lists ("Reasons (ErrorInfo ...)")."""
    _, _, listed = response["description"].partition("Reasons (ErrorInfo `reason`): ")
    assert listed, response["description"]
    return re.findall(r"`([A-Z_]+)`", listed.split(";", 1)[0])


def listed_status(reason: str) -> int:
    (known,) = (r for r in REFUSAL_REASONS if r.reason == reason)
    return known.http_status


def resolved(document: Any, value: Any) -> Any:
    """``value``, or the component its ``$ref`` names."""
    if "$ref" not in value:
        return value
    found = document
    for key in value["$ref"].removeprefix("#/").split("/"):
        found = found[key]
    return found


def rpc_operations(document: Any) -> Iterator[tuple[str, Any]]:
    """Each RPC's name with its operation in ``document``."""
    for service in SERVICES:
        for route in routes(service):
            yield route.method, document["paths"][route.path][route.http_method.lower()]


def operation_reasons(document: Any, operation: Any) -> dict[str, set[str]]:
    """The reasons each error response of an operation lists, by HTTP status."""
    return {
        status: set(response_reasons(resolved(document, answer)))
        for status, answer in operation["responses"].items()
        if status != "200"
    }


def gateway_reasons() -> set[str]:
    """The reasons of docs/api.md's table of the HTTP gateway's own refusals that any
    route of an RPC can meet: 400 ones, the framing's and another HTTP version's (505,
    which a route answers and logs as its method), not an unknown path's (404) or a
    client gone (499, answered to nobody)."""
    return {reason for _, reason, http, _ in error_tables() if http and http not in {"404", "499"}}


# What each request field can be refused for (docs/api.md, "Errors"), said once more here
# apart from service.openapi.REASONS_BY_RPC, which the document is made from: a state
# token's reasons need a ``state``, a refused move a ``move``, and so on.
FIELD_REASONS: dict[str, set[str]] = {
    "state": {
        "STATE_MISSING",
        "TOKEN_MALFORMED",
        "TOKEN_SCHEMA_UNSUPPORTED",
        "TOKEN_UNKNOWN_KEY",
        "TOKEN_INVALID",
        "TOKEN_PLAIN_DISABLED",
        "STATE_INVALID",
        "TOKEN_FROM_NEWER_RELEASE",
    },
    "seat": {"SEAT_INVALID"},
    "seat_token": {"SEAT_TOKEN_MISSING", "SEAT_TOKEN_INVALID"},
    "move": {"MOVE_MISSING", "FIELD_INVALID"} | {reason.value for reason in Reason},
    "config": {"CONFIG_INVALID", "FIELD_INVALID"},
    "seed": {"CHOSEN_DEAL_REFUSED"},
    "decks": {"DECK_INVALID", "TOO_MANY_DECKS", "FIELD_INVALID", "CHOSEN_DEAL_REFUSED"},
    "draw": {
        "DRAW_WITHOUT_DRAW_FOR_DEAL",
        "DRAW_INVALID",
        "DRAW_EXHAUSTED",
        "FIELD_INVALID",
        "CHOSEN_DEAL_REFUSED",
    },
}


def reasons_a_request_can_meet(request: Descriptor) -> set[str]:
    """The gateway's, and those of each field of the request; SEAT_MISSING (a seat
    token sent without its seat) only where ``seat`` has presence, as GetView's has."""
    found = gateway_reasons() | {"INTERNAL", "DEADLINE_EXCEEDED", "REQUEST_TOO_LARGE"}
    for field in request.fields:
        found |= FIELD_REASONS[field.name]
    seat = request.fields_by_name.get("seat")
    if seat is not None and seat.has_presence:
        found.add("SEAT_MISSING")
    return found


def test_each_operation_lists_exactly_the_reasons_its_rpc_can_be_refused_with():
    """A shared 400 once listed NOT_YOUR_TURN, MOVE_MISSING and CONFIG_INVALID for Score,
    and FAILED_PRECONDITION for NewGame and Score, which never send them: each operation's
    error responses list what its request's fields can be refused for, with the gateway's
    own refusals, and the 400 names FAILED_PRECONDITION only where a move is refused."""
    document = json.loads(COMMITTED.read_text())
    for name, operation in rpc_operations(document):
        (method,) = (m for s in SERVICES for m in s.methods if m.name == name)
        listed = operation_reasons(document, operation)
        assert set().union(*listed.values()) == reasons_a_request_can_meet(method.input_type), name
        assert set().union(*listed.values()) == REASONS_BY_RPC[name], name
        bad_request = resolved(document, operation["responses"]["400"])["description"]
        assert ("FAILED_PRECONDITION" in bad_request) == (
            "move" in method.input_type.fields_by_name
        )
    assert set(REASONS_BY_RPC) == {name for name, _ in rpc_operations(document)}
    score = operation_reasons(document, document["paths"]["/v1/krypkasino:score"]["post"])
    assert not {"NOT_YOUR_TURN", "MOVE_MISSING", "CONFIG_INVALID"} & score["400"]


@pytest.fixture(scope="module")
def refusals_by_route(server: ServerProcess) -> list[tuple[str, int, str]]:
    """Real refusals of a loopback server over HTTP, made on every route: route, status
    and reason."""
    game = rpc(server, "newGame", {"config": {"players": 2}, "seed": "7"})
    seat = game["view"]["turn"]
    asked = {"state": game["state"], "seat": seat, "seatToken": game["seatTokens"][seat]}
    wrong_token = {**asked, "seatToken": game["seatTokens"][1 - seat]}
    calls: list[tuple[str, Any]] = [
        ("newGame", {"config": {"players": 2}, "draw": {"cards": []}}),
        ("newGame", {"config": {"players": 2, "teams": 99}}),
        ("newGame", {"config": {"players": 2}, "decks": [{"cards": [{}]}]}),
        ("play", {**asked, "move": {"card": {"rank": "RANK_TEN", "suit": 99}}}),
        ("getView", {"state": game["state"], "seatToken": game["seatTokens"][seat]}),
    ]
    for route in ("legalMoves", "play", "score", "getView"):
        calls += [(route, {}), (route, {"state": "AAAA"}), (route, {"state": "A" * 400})]
    for route in ("legalMoves", "play", "getView"):
        calls += [
            (route, {**asked, "seat": 7}),
            (route, wrong_token),
            (route, {**asked, "seatToken": ""}),
        ]
    for route in ("newGame", "legalMoves", "play", "score", "getView"):
        calls += [(route, "{"), (route, {"x": 1})]
    found = []
    for route, body in calls:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        status, _, value = exchange(f"{server.http_url}/v1/krypkasino:{route}", data)
        found.append((route, status, refusal(value)[1]))
    return found


def test_each_refusal_of_a_real_server_is_listed_by_its_operation(server, refusals_by_route):
    """What the document lists per operation is what the server sends on that route."""
    document = json.loads(COMMITTED.read_text())
    paths = {
        path.rsplit(":", 1)[1]: item["post"]
        for path, item in document["paths"].items()
        if ":" in path
    }
    for route, status, reason in refusals_by_route:
        listed = operation_reasons(document, paths[route])
        assert reason in listed.get(str(status), set()), (route, status, reason)
    reached = {(route, reason) for route, _, reason in refusals_by_route}
    assert {
        ("newGame", "DRAW_WITHOUT_DRAW_FOR_DEAL"),
        ("newGame", "FIELD_INVALID"),
        ("play", "FIELD_INVALID"),
        ("getView", "SEAT_MISSING"),
        ("score", "STATE_MISSING"),
        ("score", "TOKEN_MALFORMED"),
        ("legalMoves", "SEAT_INVALID"),
        ("getView", "SEAT_TOKEN_INVALID"),
        ("play", "SEAT_TOKEN_MISSING"),
        ("newGame", "JSON_INVALID"),
    } <= reached


def card_json(card: Card) -> Any:
    return json_format.MessageToDict(card_to_proto(card))


def card_code(card: Any) -> str:
    proto = json_format.ParseDict(card, cards_pb2.Card())
    return card_str(card_from_proto(proto, "card"))


@pytest.fixture(scope="module")
def refusals(server: ServerProcess) -> list[tuple[int, str, dict[str, str]]]:
    """Real refusals of a loopback server over HTTP: status, reason and metadata."""
    game = rpc(server, "newGame", {"config": {"players": 2}, "seed": "7"})
    seat = game["view"]["turn"]
    other = 1 - seat

    def turn_of(seat: int) -> dict[str, Any]:
        return {"state": game["state"], "seat": seat, "seatToken": game["seatTokens"][seat]}

    asked = turn_of(seat)
    hand = rpc(server, "getView", asked)["view"]["hand"]
    held = {card_code(card) for card in hand + game["view"]["table"]}
    absent = next(c for c in full_deck(1) if card_str(c) not in held)
    url = f"{server.http_url}/v1/krypkasino:"
    calls: list[tuple[str, Any, dict[str, str]]] = [
        ("newGame", {"config": {"players": 9}}, {}),
        ("newGame", {"config": {"players": 2}, "decks": [{"cards": []}]}, {}),
        ("score", {}, {}),
        ("score", {"state": "AAAA"}, {}),
        ("play", {**asked, "seat": 5}, {}),
        ("play", {**asked, "seatToken": game["seatTokens"][other]}, {}),
        ("play", {**asked, "seatToken": ""}, {}),
        ("getView", {"state": game["state"], "seatToken": game["seatTokens"][other]}, {}),
        ("play", asked, {}),
        ("play", {**turn_of(other), "move": {"card": hand[0]}}, {}),
        ("play", {**asked, "move": {"card": card_json(absent)}}, {}),
        ("play", {**asked, "move": {"card": hand[0], "captures": [card_json(absent)]}}, {}),
        ("play", {**asked, "move": {"card": {"rank": "RANK_TEN"}}}, {}),
        ("play", {**asked, "x": 1}, {}),
        ("nope", {}, {}),
        ("score", "text", {"Content-Type": "text/plain"}),
        ("score", {}, {"Grpc-Timeout": "soon"}),
    ]
    found = []
    for route, body, headers in calls:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        status, _, value = exchange(url + route, data, headers=headers)
        _, reason, metadata, _ = refusal(value)
        found.append((status, reason, metadata))
    status, _, value = exchange(url + "score", method="GET")
    found.append((status, *refusal(value)[1:3]))
    return found


def test_a_real_servers_refusals_are_as_the_served_document_lists(server, refusals):
    """Each refusal's reason is listed, with the status it came with, and carries no
    metadata key the document does not list for it (a key listed may be absent: the
    docs say when each is sent)."""
    listed = listed_reasons(served_document(server))
    for status, reason, metadata in refusals:
        assert reason in listed, reason
        assert status == listed[reason][0], (reason, status)
        assert set(metadata) <= listed[reason][2], (reason, metadata)
    assert {reason for _, reason, _ in refusals} == {
        "CONFIG_INVALID",
        "DECK_INVALID",
        "STATE_MISSING",
        "TOKEN_MALFORMED",
        "SEAT_INVALID",
        "SEAT_TOKEN_INVALID",
        "SEAT_TOKEN_MISSING",
        "SEAT_MISSING",
        "MOVE_MISSING",
        "NOT_YOUR_TURN",
        "CARD_NOT_IN_HAND",
        "CAPTURE_NOT_ON_TABLE",
        "FIELD_INVALID",
        "JSON_INVALID",
        "NOT_FOUND_ROUTE",
        "UNSUPPORTED_MEDIA_TYPE",
        "TIMEOUT_INVALID",
        "METHOD_NOT_ALLOWED",
    }


def test_capture_not_on_table_names_the_captured_card_over_http(server, refusals):
    """K7.3: a UI highlights ``captured_card`` without parsing the English message;
    ``card`` stays the card played, and ``table_count`` says the table holds none of it
    (``in_hand`` is absent: the hand does not hold it either)."""
    (metadata,) = [m for _, reason, m in refusals if reason == "CAPTURE_NOT_ON_TABLE"]
    (played,) = [m["card"] for _, reason, m in refusals if reason == "CARD_NOT_IN_HAND"]
    assert metadata["captured_card"] == played  # the same card absent from hand and table
    assert set(metadata) == {"rule", "seat", "card", "captured_card", "table_count"}
    assert metadata["table_count"] == "0"


def test_config_invalid_carries_the_rule_its_message_cites_over_http(server, refusals):
    """K3.1: as a refused move's, a refused configuration's rule ID is in metadata
    ``rule`` too, so that a client can say it in its own words without parsing the
    English message; ``flag`` names the field."""
    (metadata,) = [m for _, reason, m in refusals if reason == "CONFIG_INVALID"]
    assert metadata == {"flag": "players", "rule": "K3.1"}
