"""The document's ``required`` lists and oneOfs say what the gateway really sends.

Responses print every field without presence (``message_json``), so response
schemas require those fields and the ones the service always sets
(``SET_IN_EVERY_RESPONSE``); each oneof is a ``oneOf``. Request schemas
require nothing: the server parses any subset of the fields. Checked against
the gateway's own printing and parsing and real responses of whole games over HTTP.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from functools import cache
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor, OneofDescriptor
from google.protobuf.message_factory import GetMessageClass
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from service.errors import ServiceError
from service.http_json import message_json, parse_request
from service.http_routes import message_descriptor, routes
from service.openapi import (
    COMMITTED,
    INPUT_SUFFIX,
    SERVICES,
    SET_IN_EVERY_RESPONSE,
    SchemaBuilder,
    reachable,
    real_oneofs,
)
from tests.service.server_process import ServerProcess
from tests.service.test_http_server import rpc

DOCUMENT: dict[str, Any] = json.loads(COMMITTED.read_text())
SCHEMAS: dict[str, Any] = DOCUMENT["components"]["schemas"]
DOCUMENT_URI = "urn:cardrules:openapi"
ROUTES = [route for service in SERVICES for route in routes(service)]
RESPONSES = [message_descriptor(route.response_class) for route in ROUTES]
REQUESTS = [message_descriptor(route.request_class) for route in ROUTES]
OUTPUTS = reachable(RESPONSES)
EVENT = "cardrules.krypkasino.v1.Event"


def validator(name: str, document: dict[str, Any]) -> Any:
    """A JSON Schema 2020-12 (OpenAPI 3.1's dialect) validator of ``document``'s schema
    ``name``, its $refs resolved in ``document``."""
    registry: Registry[Any] = Registry().with_resource(
        DOCUMENT_URI, DRAFT202012.create_resource(document)
    )
    schema = {"$ref": f"{DOCUMENT_URI}#/components/schemas/{name}"}
    return jsonschema.Draft202012Validator(schema, registry=registry)


@cache
def component(name: str) -> Any:
    """A validator of the committed document's schema ``name``."""
    return validator(name, DOCUMENT)


def descriptors_by_name() -> dict[str, Descriptor]:
    found: dict[str, Descriptor] = {}
    pending = [*REQUESTS, *RESPONSES]
    while pending:
        descriptor = pending.pop()
        if descriptor.full_name not in found:
            found[descriptor.full_name] = descriptor
            pending.extend(f.message_type for f in descriptor.fields if f.message_type)
    return found


MESSAGES = descriptors_by_name()


def declared_oneof(field: FieldDescriptor) -> OneofDescriptor | None:
    """The field's oneof, unless it is a proto3 ``optional``'s."""
    oneof = field.containing_oneof
    return oneof if oneof is not None and oneof in real_oneofs(field.containing_type) else None


def sent_always(field: FieldDescriptor) -> bool:
    """Whether the gateway's responses hold the field whenever they hold its message.

    A response's oneof holds exactly one member when the service always sets it
    (Event.kind, the only oneof): leaving out the one present leaves none.
    """
    if (oneof := declared_oneof(field)) is not None:
        return oneof.full_name in SET_IN_EVERY_RESPONSE
    return not field.has_presence or field.full_name in SET_IN_EVERY_RESPONSE


# -- the document ---------------------------------------------------------------------


def test_each_name_set_in_every_response_is_a_message_field_or_a_oneof():
    """A misspelt name would require nothing; fields without presence need no listing."""
    oneofs = {o.full_name for d in MESSAGES.values() for o in real_oneofs(d)}
    message_fields = {
        f.full_name
        for name, d in MESSAGES.items()
        if name in OUTPUTS
        for f in d.fields
        if f.message_type is not None and not f.is_repeated and declared_oneof(f) is None
    }
    assert oneofs | message_fields >= SET_IN_EVERY_RESPONSE


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_a_response_schema_requires_what_the_gateway_prints_for_an_empty_message(name):
    """``message_json`` of an empty message prints exactly the fields without presence;
    the schema requires those and ``SET_IN_EVERY_RESPONSE``'s."""
    descriptor = MESSAGES[name]
    printed = set(json.loads(message_json(GetMessageClass(descriptor)())))
    always_set = {f.json_name for f in descriptor.fields if f.full_name in SET_IN_EVERY_RESPONSE}
    assert set(SCHEMAS[name].get("required", [])) == printed | always_set
    assert not printed & always_set


def test_response_schemas_require_fields():
    required = {name: set(SCHEMAS[name].get("required", [])) for name in OUTPUTS}
    assert {"gameId", "config", "handSizes", "dealer", "moveNumber", "stateId"} <= required[
        "cardrules.krypkasino.v1.View"
    ]
    assert (
        not {"seat", "turn", "lastCapturer", "bordstabbeSeat"}
        & required["cardrules.krypkasino.v1.View"]
    )
    assert required["cardrules.cards.v1.Card"] == {"rank", "suit"}
    assert required["cardrules.krypkasino.v1.GameConfig"] == {
        "players",
        "teams",
        "firstDealer",
        "drawForDeal",
        "tieRule",
    }
    assert required["cardrules.krypkasino.v1.NewGameResponse"] == {
        "gameId",
        "state",
        "seatTokens",
        "view",
        "events",
    }
    assert required["cardrules.krypkasino.v1.LegalMove"] == {"move", "kind", "cardPoints"}
    assert required[EVENT] == set(), "a oneof member is required through oneOf only"


def request_schema_names() -> set[str]:
    """Every schema a request body reaches, through its $refs."""
    names: set[str] = set()
    pending = [
        operation["requestBody"]["content"]["application/json"]["schema"]
        for item in DOCUMENT["paths"].values()
        for operation in item.values()
        if "requestBody" in operation
    ]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            ref = value.get("$ref", "")
            name = ref.removeprefix("#/components/schemas/")
            if ref and name not in names:
                names.add(name)
                pending.append(SCHEMAS[name])
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return names


def test_request_schemas_require_nothing_as_the_server_parses_any_subset_of_fields():
    names = request_schema_names()
    shared = {n.removesuffix(INPUT_SUFFIX) for n in names if n.endswith(INPUT_SUFFIX)}
    assert shared == {
        "cardrules.krypkasino.v1.GameConfig",
        "cardrules.krypkasino.v1.Rules",
        "cardrules.cards.v1.Card",
        "cardrules.krypkasino.v1.Move",
    }, "the messages requests and responses share have a request form each"
    assert not names & OUTPUTS, "no request reaches a response form"
    for name in names:
        schema = SCHEMAS[name]
        assert "required" not in schema, name
        if schema["type"] == "object":
            assert component(name).is_valid({}), name
    for route in ROUTES:
        parse_request(b"{}", route.request_class)  # the empty request parses
    # Parsed too, and valid: the RPCs refuse what they cannot use (a card without
    # its suit is FIELD_INVALID), not the JSON.
    parse_request(b'{"seat": 1, "move": {"card": {"rank": "RANK_TEN"}}}', pb.PlayRequest)
    assert component("cardrules.krypkasino.v1.PlayRequest").is_valid(
        {"seat": 1, "move": {"card": {"rank": "RANK_TEN"}}}
    )
    assert component("cardrules.krypkasino.v1.NewGameRequest").is_valid(
        {"config": {"players": 2, "rules": {"singleDeck": True}}}
    )


def test_an_event_holds_exactly_one_kind():
    event = component(EVENT)
    crawled = {"seat": 0, "card": {"rank": "RANK_TWO", "suit": "SUIT_CLUBS"}}
    assert event.is_valid({"crawled": crawled})
    assert not event.is_valid({}), "an event without its kind"
    assert not event.is_valid({"crawled": crawled, "bordstabbe": {"seat": 1}}), "two kinds"
    assert [branch["required"] for branch in SCHEMAS[EVENT]["oneOf"]] == [
        [field.json_name] for field in pb.Event.DESCRIPTOR.oneofs_by_name["kind"].fields
    ]
    for field in pb.Event.DESCRIPTOR.fields:
        description = SCHEMAS[EVENT]["properties"][field.json_name]["description"]
        assert description.endswith("One of `kind`: exactly one of these fields is set.")


def test_every_oneof_of_the_protos_is_a_one_of():
    """Event.kind is the only oneof; proto3 ``optional`` fields are none."""
    oneofs = {o.full_name for d in MESSAGES.values() for o in real_oneofs(d)}
    assert oneofs == {"cardrules.krypkasino.v1.Event.kind"}
    for name, descriptor in MESSAGES.items():
        if name in SCHEMAS:
            assert ("oneOf" in SCHEMAS[name]) == bool(real_oneofs(descriptor)), name


# -- a oneof that may be unset, several oneofs, a message in requests and responses -----


def choice_descriptor() -> Descriptor:
    """``Choice`` with two oneofs, a proto3 ``optional`` and a plain field."""
    file = descriptor_pb2.FileDescriptorProto(
        name="test/openapi_choice.proto", package="test.openapi.v1", syntax="proto3"
    )
    one = FieldDescriptor.LABEL_OPTIONAL
    number, text = FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_STRING
    choice = file.message_type.add(name="Choice")
    for name in ("pick", "other", "_maybe"):
        choice.oneof_decl.add(name=name)
    choice.field.add(name="a", number=1, type=number, label=one, oneof_index=0, json_name="a")
    choice.field.add(name="b", number=2, type=text, label=one, oneof_index=0, json_name="b")
    choice.field.add(name="c", number=3, type=number, label=one, oneof_index=1, json_name="c")
    choice.field.add(name="d", number=4, type=number, label=one, oneof_index=1, json_name="d")
    choice.field.add(
        name="maybe",
        number=5,
        type=number,
        label=one,
        oneof_index=2,
        proto3_optional=True,
        json_name="maybe",
    )
    choice.field.add(name="plain", number=6, type=number, label=one, json_name="plain")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool.FindMessageTypeByName("test.openapi.v1.Choice")


@pytest.mark.parametrize("output", [False, True])
def test_a_oneof_not_always_set_holds_at_most_one_member(output):
    descriptor = choice_descriptor()
    builder = SchemaBuilder({}, frozenset({descriptor.full_name}))
    ref = builder.message(descriptor, output=output)
    name = "test.openapi.v1.Choice" + ("" if output else INPUT_SUFFIX)
    assert ref == {"$ref": f"#/components/schemas/{name}"}
    schema = builder.schemas[name]
    assert schema.get("required") == (["plain"] if output else None)
    assert [len(group["oneOf"]) for group in schema["allOf"]] == [3, 3], "maybe is no oneof"
    check = validator(name, {"components": {"schemas": builder.schemas}}).is_valid
    base = {"plain": 0} if output else {}
    assert check(base)
    assert check({**base, "a": 1}) and check({**base, "b": "x", "d": 2, "maybe": 3})
    assert not check({**base, "a": 1, "b": "x"})
    assert not check({**base, "c": 1, "d": 2})
    message_class = GetMessageClass(descriptor)
    with pytest.raises(ServiceError, match="multiple"):  # as the server parses requests
        parse_request(b'{"a": 1, "b": "x"}', message_class)


# -- real responses ---------------------------------------------------------------------

GAMES: list[tuple[dict[str, Any], int]] = [
    ({"players": 2, "matchDeals": 2, "rules": {"singleDeck": True}}, 11),
    (
        {
            "players": 4,
            "teams": "TEAM_MODE_PAIRS",
            "drawForDeal": True,
            "targetScore": 1,
            "rules": {"bordstabbe": True, "lastCapturePoint": True},
        },
        12,
    ),
    (
        {
            "players": 3,
            "targetScore": 1,
            "tieRule": "TIE_RULE_TIEBREAK_DEAL",
            "rules": {"singleDeck": True, "removal": "REMOVAL_NONE"},
        },
        13,
    ),
]


@pytest.fixture(scope="module")
def answers(server: ServerProcess) -> list[tuple[str, Any]]:
    """(response message name, JSON body) of every answer of whole games played over HTTP."""
    found: list[tuple[str, Any]] = []

    def call(name: str, body: dict[str, Any], response: type[Any]) -> Any:
        value = rpc(server, name, body)
        found.append((response.DESCRIPTOR.full_name, value))
        return value

    for config, seed in GAMES:
        choose = random.Random(seed)
        game = call("newGame", {"config": config, "seed": str(seed)}, pb.NewGameResponse)
        state, tokens, view = game["state"], game["seatTokens"], game["view"]
        for move_number in range(1000):
            if "turn" not in view:
                break
            seat = view["turn"]
            token = tokens[seat]
            asked = {"state": state, "seat": seat, "seatToken": token}
            moves = call("legalMoves", asked, pb.LegalMovesResponse)["moves"]
            played = call("play", {**asked, "move": choose.choice(moves)["move"]}, pb.PlayResponse)
            state, view = played["state"], played["view"]
            if move_number % 10 == 0:
                call("getView", {"state": state}, pb.GetViewResponse)
                call(
                    "getView",
                    {"state": state, "seat": 0, "seatToken": tokens[0]},
                    pb.GetViewResponse,
                )
                call("score", {"state": state}, pb.ScoreResponse)
                other = (seat + 1) % len(tokens)  # no moves unless it is its turn
                call(
                    "legalMoves",
                    {"state": state, "seat": other, "seatToken": tokens[other]},
                    pb.LegalMovesResponse,
                )
        else:
            raise AssertionError(f"the game {config} did not end")
        call("score", {"state": state}, pb.ScoreResponse)
        call("getView", {"state": state}, pb.GetViewResponse)
    return found


def test_real_responses_are_valid_and_hold_every_kind_of_event_played(answers):
    kinds: set[str] = set()
    for name, body in answers:
        errors = [error.message for error in component(name).iter_errors(body)]
        assert not errors, (name, errors[:3])
        for event in body.get("events", []):
            kinds.update(event)
    assert {
        "dealerDrawn",
        "distributionDealt",
        "cardsSetAside",
        "crawled",
        "captured",
        "dealEnded",
        "matchEnded",
    } <= kinds
    assert {name for name, _ in answers} == {d.full_name for d in RESPONSES}


def objects(
    value: Any, descriptor: Descriptor, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], Descriptor, dict[str, Any]]]:
    """(path, descriptor, object) of each message in a response body, the body first."""
    yield path, descriptor, value
    by_json_name = {field.json_name: field for field in descriptor.fields}
    for key, item in value.items():
        field = by_json_name[key]
        if field.message_type is None:
            continue
        if field.is_repeated:
            for index, element in enumerate(item):
                yield from objects(element, field.message_type, (*path, key, index))
        else:
            yield from objects(item, field.message_type, (*path, key))


def without(body: Any, path: tuple[str | int, ...], key: str) -> Any:
    """A copy of ``body`` without ``key`` in the object at ``path``."""
    mutant = copy.deepcopy(body)
    target = mutant
    for step in path:
        target = target[step]
    del target[key]
    return mutant


def full_name(short: str) -> str:
    """``View.handSizes`` -> ``cardrules.krypkasino.v1.View.hand_sizes``."""
    message, json_name = short.split(".")
    descriptor = MESSAGES[f"cardrules.krypkasino.v1.{message}"]
    return next(f.full_name for f in descriptor.fields if f.json_name == json_name)


def test_leaving_out_of_a_real_response_a_field_always_sent_makes_it_invalid(answers):
    """Each field of each message the games showed, once: the response is invalid
    without it exactly when the gateway always sends it."""
    valid_without: dict[str, bool] = {}
    for name, body in answers:
        for path, descriptor, value in objects(body, MESSAGES[name]):
            by_json_name = {field.json_name: field for field in descriptor.fields}
            for key in value:
                field = by_json_name[key]
                if field.full_name not in valid_without:
                    valid = component(name).is_valid(without(body, path, key))
                    valid_without[field.full_name] = valid
                    assert valid != sent_always(field), (field.full_name, valid)
    assert sum(not valid for valid in valid_without.values()) > 50
    for short in ("View.gameId", "View.handSizes", "View.config", "Crawled.card", "Event.crawled"):
        assert valid_without[full_name(short)] is False, short
    for short in ("View.seat", "View.turn", "View.lastCapturer", "GameConfig.matchDeals"):
        assert valid_without[full_name(short)] is True, short
