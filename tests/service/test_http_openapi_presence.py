"""The document's ``required`` lists and oneOfs say what the gateway really sends and takes.

Responses print every field without presence (``message_json``), so response
schemas require those fields and the ones the service always sets
(``SET_IN_EVERY_RESPONSE``); each oneof is a ``oneOf`` (``Event``: of one
wrapper schema per kind). Request schemas require exactly the fields the
server refuses a request without (``REQUIRED_IN_REQUESTS``: the fields proto/ marks
``(google.api.field_behavior) = REQUIRED``). Checked against
the gateway's own printing and parsing, real requests and responses of whole
games over HTTP, and a real server's refusals of requests that leave out one
required field.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
from cardrules.cards.v1 import cards_pb2
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message_factory import GetMessageClass
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from service.descriptors import message_descriptor
from service.errors import ServiceError
from service.http_json import message_json, parse_request
from service.http_routes import routes
from service.openapi import (
    COMMITTED,
    FIELD_BOUNDS,
    INPUT_SUFFIX,
    REQUIRED_IN_REQUESTS,
    SERVICES,
    SET_IN_EVERY_RESPONSE,
    STATUS,
    SchemaBuilder,
    component_keys,
    declared_oneof,
    reachable,
    real_oneofs,
)
from tests.service.http_helpers import exchange, refusal, rpc
from tests.service.server_process import ServerProcess

DOCUMENT: dict[str, Any] = json.loads(COMMITTED.read_text())
# The document keys each schema by its title; these tests start from descriptors, so
# they find schemas by the full name each is built under (``component_keys``).
KEYS = component_keys()
NAMES = {key: name for name, key in KEYS.items()}
SCHEMAS: dict[str, Any] = {
    NAMES[key]: schema for key, schema in DOCUMENT["components"]["schemas"].items()
}
DOCUMENT_URI = "urn:cardrules:openapi"
ROUTES = [route for service in SERVICES for route in routes(service)]
RESPONSES = [message_descriptor(route.response_class) for route in ROUTES]
REQUESTS = [message_descriptor(route.request_class) for route in ROUTES]
OUTPUTS = reachable(RESPONSES).keys()
INPUTS = reachable(REQUESTS).keys()
EVENT = "cardrules.krypkasino.v1.Event"
# The request message of each RPC by the last part of its path (``newGame``).
REQUEST_OF = {
    route.path.rsplit(":", 1)[1]: message_descriptor(route.request_class).full_name
    for route in ROUTES
}


def ref(name: str) -> str:
    """The committed document's reference to the schema built under ``name``."""
    return f"#/components/schemas/{KEYS[name]}"


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
    """A validator of the committed document's schema built under ``name`` (or a JSON
    pointer below the component, ``...PlayRequest/properties/move``)."""
    schema, slash, below = name.partition("/")
    return validator(KEYS[schema] + slash + below, DOCUMENT)


MESSAGES = reachable([*REQUESTS, *RESPONSES])


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
        "rules",
        "firstDealer",
        "drawForDeal",
        "tieRule",
    }, "rules too: a view's config in force names every flag (docs/api.md)"
    assert required["cardrules.krypkasino.v1.NewGameResponse"] == {
        "gameId",
        "state",
        "seatTokens",
        "view",
        "events",
    }
    assert required["cardrules.krypkasino.v1.LegalMove"] == {
        "move",
        "kind",
        "cardPoints",
        "sweepRanksAfter",
    }
    assert "score" in required["cardrules.krypkasino.v1.DealEnded"], "always built with one"
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
            reference = value.get("$ref", "")
            name = NAMES.get(reference.removeprefix("#/components/schemas/"), "")
            if reference and name not in names:
                names.add(name)
                pending.append(SCHEMAS[name])
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return names


def test_each_name_required_in_requests_is_a_field_requests_hold():
    """A misspelt name would require nothing."""
    fields = {f.full_name for name in INPUTS for f in MESSAGES[name].fields}
    assert fields >= REQUIRED_IN_REQUESTS
    seats = {f for f in fields if f.endswith(".seat")}
    assert seats and not seats & REQUIRED_IN_REQUESTS, "seat 0 is valid and may be omitted"
    assert "cardrules.krypkasino.v1.GetViewRequest.seat_token" not in REQUIRED_IN_REQUESTS


def test_request_schemas_require_exactly_what_the_server_refuses_requests_without():
    names = request_schema_names()
    apart = {n.removesuffix(INPUT_SUFFIX) for n in names if n.endswith(INPUT_SUFFIX)}
    assert apart == {
        "cardrules.krypkasino.v1.GameConfig",
        "cardrules.krypkasino.v1.Rules",
    }, "only messages whose response form requires what requests need not send"
    shared = names & OUTPUTS
    assert shared == {"cardrules.cards.v1.Card", "cardrules.krypkasino.v1.Move"}
    for name in names:
        if SCHEMAS[name]["type"] != "object":
            continue  # an enum
        descriptor = MESSAGES[name.removesuffix(INPUT_SUFFIX)]
        required = {f.json_name for f in descriptor.fields if f.full_name in REQUIRED_IN_REQUESTS}
        if name in shared:
            # The response form, whose other required fields are repeated: sendable as [].
            extra = set(SCHEMAS[name]["required"]) - required
            by_json_name = {f.json_name: f for f in descriptor.fields}
            assert all(by_json_name[key].is_repeated for key in extra), name
            assert "additionalProperties" not in SCHEMAS[name], name
        else:
            assert set(SCHEMAS[name].get("required", [])) == required, name
            assert SCHEMAS[name]["additionalProperties"] is False, name
    for route in ROUTES:
        parse_request(b"{}", route.request_class)  # the empty request parses; the RPC refuses
    # Parsed and valid: the RPCs refuse a card without its suit (FIELD_INVALID), not the JSON.
    parse_request(b'{"seat": 1, "move": {"card": {"rank": "RANK_TEN"}}}', pb.PlayRequest)
    play = component("cardrules.krypkasino.v1.PlayRequest")
    move = {"card": {"rank": "RANK_TEN", "suit": "SUIT_HEARTS"}, "captures": []}
    assert play.is_valid({"state": "AA==", "seatToken": "AA==", "move": move})
    assert not play.is_valid({"state": "AA==", "seatToken": "AA==", "move": {"card": {}}})
    assert not play.is_valid({"state": "AA==", "seatToken": "AA==", "move": move, "x": 1})
    assert component("cardrules.krypkasino.v1.NewGameRequest").is_valid(
        {"config": {"players": 2, "rules": {"singleDeck": True}}}
    )


def test_an_event_is_one_of_a_wrapper_per_kind():
    event = component(EVENT)
    crawled = {"seat": 0, "card": {"rank": "RANK_TWO", "suit": "SUIT_CLUBS"}}
    assert event.is_valid({"crawled": crawled})
    assert not event.is_valid({}), "an event without its kind"
    assert not event.is_valid({"crawled": crawled, "bordstabbe": {"seat": 1}}), "two kinds"
    kinds = pb.Event.DESCRIPTOR.oneofs_by_name["kind"].fields
    schema = SCHEMAS[EVENT]
    assert set(schema) == {"title", "description", "oneOf"}
    assert schema["description"].startswith("Something that happened.")
    names = [
        f"cardrules.krypkasino.v1.Event{f.json_name[0].upper()}{f.json_name[1:]}" for f in kinds
    ]
    assert schema["oneOf"] == [{"$ref": ref(name)} for name in names]
    assert SCHEMAS["cardrules.krypkasino.v1.EventCrawled"] == {
        "title": "EventCrawled",
        "type": "object",
        "properties": {
            "crawled": {
                "$ref": "#/components/schemas/Crawled",
                "description": "A card crawled.",
            }
        },
        "required": ["crawled"],
    }
    for name, field in zip(names, kinds, strict=True):
        assert SCHEMAS[name]["required"] == [field.json_name]
        assert "additionalProperties" not in SCHEMAS[name], "a later field must not break clients"


def test_a_views_last_move_is_one_of_a_wrapper_per_kind():
    """docs/api.md "OpenAPI": a view's ``lastMove`` is a ``oneOf`` the same way as an
    ``Event`` (``LastMoveCrawled``, ``LastMoveCaptured``): the service sets its kind
    whenever there is a last move (``SET_IN_EVERY_RESPONSE``)."""
    last_move = "cardrules.krypkasino.v1.LastMove"
    kinds = pb.LastMove.DESCRIPTOR.oneofs_by_name["kind"].fields
    names = [f"{last_move}{f.json_name[0].upper()}{f.json_name[1:]}" for f in kinds]
    assert {"LastMoveCrawled", "LastMoveCaptured"} <= {SCHEMAS[name]["title"] for name in names}
    assert SCHEMAS[last_move]["oneOf"] == [{"$ref": ref(n)} for n in names]
    assert not component(last_move).is_valid({}), "a last move without its kind"


def test_every_oneof_of_the_protos_is_a_one_of():
    """Event.kind and LastMove.kind are the only oneofs; proto3 ``optional`` fields are
    none."""
    oneofs = {o.full_name for d in MESSAGES.values() for o in real_oneofs(d)}
    assert oneofs == {"cardrules.krypkasino.v1.Event.kind", "cardrules.krypkasino.v1.LastMove.kind"}
    for name, descriptor in MESSAGES.items():
        if name in SCHEMAS:
            assert ("oneOf" in SCHEMAS[name]) == bool(real_oneofs(descriptor)), name


# -- a oneof that may be unset, several oneofs, a message in requests and responses -----


TEST_PACKAGE = "test.openapi.v1"
TYPE_MESSAGE, LABEL_REPEATED = FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.LABEL_REPEATED
INNER = f".{TEST_PACKAGE}.Inner"


def proto_file(stem: str) -> descriptor_pb2.FileDescriptorProto:
    """An empty proto3 file of the test package."""
    return descriptor_pb2.FileDescriptorProto(
        name=f"test/{stem}.proto", package=TEST_PACKAGE, syntax="proto3"
    )


def add_field(
    message: descriptor_pb2.DescriptorProto,
    name: str,
    number: int,
    kind: int = FieldDescriptor.TYPE_INT32,
    **options: Any,
) -> None:
    """A field as protoc declares it: singular unless ``label`` says otherwise, with the
    lowerCamelCase ``json_name``."""
    first, *rest = name.split("_")
    options.setdefault("label", FieldDescriptor.LABEL_OPTIONAL)
    json_name = first + "".join(part.title() for part in rest)
    message.field.add(name=name, number=number, type=kind, json_name=json_name, **options)


def pooled(file: descriptor_pb2.FileDescriptorProto, *names: str) -> list[Descriptor]:
    """The messages ``names`` of ``file``, added to a pool of its own."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return [pool.FindMessageTypeByName(f"{TEST_PACKAGE}.{name}") for name in names]


def choice_descriptor() -> Descriptor:
    """``Choice`` with two oneofs, a proto3 ``optional`` and a plain field."""
    file = proto_file("openapi_choice")
    choice = file.message_type.add(name="Choice")
    for name in ("pick", "other", "_maybe"):
        choice.oneof_decl.add(name=name)
    add_field(choice, "a", 1, oneof_index=0)
    add_field(choice, "b", 2, FieldDescriptor.TYPE_STRING, oneof_index=0)
    add_field(choice, "c", 3, oneof_index=1)
    add_field(choice, "d", 4, oneof_index=1)
    add_field(choice, "maybe", 5, oneof_index=2, proto3_optional=True)
    add_field(choice, "plain", 6)
    (descriptor,) = pooled(file, "Choice")
    return descriptor


@pytest.mark.parametrize("output", [False, True])
def test_a_oneof_not_always_set_holds_at_most_one_member(output):
    descriptor = choice_descriptor()
    builder = SchemaBuilder({}, frozenset({descriptor.full_name}))
    reference = builder.message(descriptor, output=output)
    name = "test.openapi.v1.Choice" + ("" if output else INPUT_SUFFIX)
    assert reference == {"$ref": f"#/components/schemas/{name}"}
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


def nesting_descriptors() -> tuple[Descriptor, Descriptor]:
    """``Outer`` holding an ``Inner`` (which prints ``x`` always) and ``Holder`` holding
    only a repeated field."""
    file = proto_file("openapi_nesting")
    add_field(file.message_type.add(name="Inner"), "x", 1)
    add_field(file.message_type.add(name="Outer"), "inner", 1, TYPE_MESSAGE, type_name=INNER)
    add_field(file.message_type.add(name="Holder"), "xs", 1, label=LABEL_REPEATED)
    outer, holder = pooled(file, "Outer", "Holder")
    return outer, holder


def test_a_request_form_apart_for_a_message_holding_one_and_none_for_repeated_fields():
    outer, holder = nesting_descriptors()
    builder = SchemaBuilder({}, reachable([outer, holder]))
    assert builder.message(outer, output=False) == {
        "$ref": "#/components/schemas/test.openapi.v1.Outer-Input"
    }, "Outer requires nothing itself, but its Inner's forms differ"
    assert builder.schemas["test.openapi.v1.Outer-Input"]["properties"]["inner"] == {
        "$ref": "#/components/schemas/test.openapi.v1.Inner-Input"
    }
    assert builder.schemas["test.openapi.v1.Outer-Input"]["title"] == "OuterInput"
    assert builder.message(holder, output=False) == {
        "$ref": "#/components/schemas/test.openapi.v1.Holder"
    }, "a request can send the empty list responses always print"
    shared = builder.schemas["test.openapi.v1.Holder"]
    assert shared["required"] == ["xs"] and "additionalProperties" not in shared


def kinds_descriptor(*, extra_field: bool = False, taken: str | None = None) -> Descriptor:
    """``Kinds``: one oneof ``kind`` of a message ``a`` and a number ``bB``; with
    ``extra_field`` a plain field beside it, with ``taken`` a message of that name too."""
    file = proto_file("openapi_kinds")
    add_field(file.message_type.add(name="Inner"), "n", 1)
    kinds = file.message_type.add(name="Kinds")
    kinds.oneof_decl.add(name="kind")
    add_field(kinds, "a", 1, TYPE_MESSAGE, type_name=INNER, oneof_index=0)
    add_field(kinds, "b_b", 2, oneof_index=0)
    if extra_field:
        add_field(kinds, "plain", 3)
    if taken is not None:
        file.message_type.add(name=taken)
    (descriptor,) = pooled(file, "Kinds")
    return descriptor


@pytest.fixture
def kind_always_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "service.openapi.SET_IN_EVERY_RESPONSE",
        SET_IN_EVERY_RESPONSE | {"test.openapi.v1.Kinds.kind"},
    )


def test_a_message_that_is_one_oneof_always_set_is_one_of_wrappers(kind_always_set):
    descriptor = kinds_descriptor()
    builder = SchemaBuilder({"test.openapi.v1.Kinds": "Kinds."}, reachable([descriptor]))
    assert builder.message(descriptor, output=True) == {
        "$ref": "#/components/schemas/test.openapi.v1.Kinds"
    }
    schemas = builder.schemas
    assert schemas["test.openapi.v1.Kinds"]["oneOf"] == [
        {"$ref": "#/components/schemas/test.openapi.v1.KindsA"},
        {"$ref": "#/components/schemas/test.openapi.v1.KindsBB"},
    ]
    assert schemas["test.openapi.v1.Kinds"]["description"].startswith("Kinds.")
    assert schemas["test.openapi.v1.KindsBB"]["title"] == "KindsBB"
    assert schemas["test.openapi.v1.KindsBB"]["required"] == ["bB"]
    check = validator("test.openapi.v1.Kinds", {"components": {"schemas": schemas}}).is_valid
    assert check({"a": {"n": 1}}) and check({"bB": 2})
    assert not check({}) and not check({"a": {"n": 1}, "bB": 2})


def test_a_oneof_always_set_beside_other_fields_keeps_the_constraint_form(kind_always_set):
    descriptor = kinds_descriptor(extra_field=True)
    builder = SchemaBuilder({}, reachable([descriptor]))
    builder.message(descriptor, output=True)
    schema = builder.schemas["test.openapi.v1.Kinds"]
    assert schema["oneOf"] == [{"required": ["a"]}, {"required": ["bB"]}]
    assert schema["required"] == ["plain"] and "test.openapi.v1.KindsA" not in builder.schemas


def test_a_wrapper_named_like_a_message_is_refused(kind_always_set):
    descriptor = kinds_descriptor(taken="KindsA")
    with pytest.raises(ValueError, match="KindsA"):
        SchemaBuilder({}, reachable([descriptor])).message(descriptor, output=True)


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


@dataclass
class Played:
    """(message name, JSON body) of every request sent and answer got in whole games."""

    requests: list[tuple[str, Any]] = dataclasses.field(default_factory=list)
    answers: list[tuple[str, Any]] = dataclasses.field(default_factory=list)


@pytest.fixture(scope="module")
def played(server: ServerProcess) -> Played:
    """The games of ``GAMES`` played over HTTP."""
    found = Played()

    def call(name: str, body: dict[str, Any], response: type[Any]) -> Any:
        found.requests.append((REQUEST_OF[name], copy.deepcopy(body)))
        value = rpc(server, name, body)
        found.answers.append((response.DESCRIPTOR.full_name, value))
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


@pytest.fixture(scope="module")
def answers(played: Played) -> list[tuple[str, Any]]:
    """(response message name, JSON body) of every answer of whole games played over HTTP."""
    return played.answers


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


def copy_at(body: Any, path: tuple[str | int, ...]) -> tuple[Any, Any]:
    """A deep copy of ``body``, and the object at ``path`` in the copy."""
    mutant = copy.deepcopy(body)
    target = mutant
    for step in path:
        target = target[step]
    return mutant, target


def without(body: Any, path: tuple[str | int, ...], key: str) -> Any:
    """A copy of ``body`` without ``key`` in the object at ``path``."""
    mutant, target = copy_at(body, path)
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
    # Every name docs/api.md lists as set in every response ("OpenAPI"), so that one
    # dropped from SET_IN_EVERY_RESPONSE is missed here too, with a field never absent.
    for short in (
        "View.gameId",
        "View.handSizes",
        "NewGameResponse.view",
        "PlayResponse.view",
        "GetViewResponse.view",
        "View.config",
        "GameConfig.rules",
        "LegalMove.move",
        "Move.card",
        "Crawled.card",
        "Captured.card",
        "DealEnded.score",
        "Event.crawled",
        "LastMove.captured",
    ):
        assert valid_without[full_name(short)] is False, short
    for short in ("View.seat", "View.turn", "View.lastCapturer", "GameConfig.matchDeals"):
        assert valid_without[full_name(short)] is True, short


# -- real requests and refusals ---------------------------------------------------------


def test_every_request_of_the_games_is_valid_under_its_schema(played):
    assert {name for name, _ in played.requests} == {d.full_name for d in REQUESTS}
    for name, body in played.requests:
        errors = [error.message for error in component(name).iter_errors(body)]
        assert not errors, (name, errors[:3])


def test_a_legal_move_as_sent_is_the_move_of_a_play_request(answers):
    """One schema: a generated client passes LegalMove.move on to PlayRequest.move as it is."""
    legal = SCHEMAS["cardrules.krypkasino.v1.LegalMove"]["properties"]["move"]["$ref"]
    play = SCHEMAS["cardrules.krypkasino.v1.PlayRequest"]["properties"]["move"]["$ref"]
    assert legal == play == "#/components/schemas/Move"
    as_play_move = component("cardrules.krypkasino.v1.PlayRequest/properties/move")
    moves = [
        legal_move["move"]
        for name, body in answers
        if name == "cardrules.krypkasino.v1.LegalMovesResponse"
        for legal_move in body["moves"]
    ]
    assert any(move["captures"] for move in moves) and any(not m["captures"] for m in moves)
    for move in moves:
        assert as_play_move.is_valid(move), move


@dataclass(frozen=True)
class Leaving:
    """An otherwise valid request to ``rpc`` and the field (``key`` of the object at
    ``path``) whose absence the server refuses with ``status`` and ``reason``, naming
    ``violation`` in a BadRequest (None: no BadRequest)."""

    rpc: str
    body: dict[str, Any]
    path: tuple[str, ...]
    key: str
    status: int
    reason: str
    violation: str | None


def leavings(server: ServerProcess, game: Any) -> dict[str, Leaving]:
    """A case for each field of ``REQUIRED_IN_REQUESTS``, from a real 2-player game."""
    state, tokens, turn = game["state"], game["seatTokens"], game["view"]["turn"]
    asked = {"state": state, "seat": turn, "seatToken": tokens[turn]}
    move = rpc(server, "legalMoves", asked)["moves"][0]["move"]
    play = {**asked, "move": move}
    k, c = "cardrules.krypkasino.v1.", "cardrules.cards.v1."
    config = {"config": {"players": 2, "matchDeals": 2}, "seed": "3"}
    return {
        k + "NewGameRequest.config": Leaving(
            "newGame", config, (), "config", 400, "CONFIG_INVALID", "config.players"
        ),
        k + "GameConfig.players": Leaving(
            "newGame", config, ("config",), "players", 400, "CONFIG_INVALID", "config.players"
        ),
        k + "LegalMovesRequest.state": Leaving(
            "legalMoves", asked, (), "state", 400, "STATE_MISSING", "state"
        ),
        k + "LegalMovesRequest.seat_token": Leaving(
            "legalMoves", asked, (), "seatToken", 403, "SEAT_TOKEN_MISSING", None
        ),
        k + "PlayRequest.state": Leaving("play", play, (), "state", 400, "STATE_MISSING", "state"),
        k + "PlayRequest.seat_token": Leaving(
            "play", play, (), "seatToken", 403, "SEAT_TOKEN_MISSING", None
        ),
        k + "PlayRequest.move": Leaving("play", play, (), "move", 400, "MOVE_MISSING", "move"),
        k + "ScoreRequest.state": Leaving(
            "score", {"state": state}, (), "state", 400, "STATE_MISSING", "state"
        ),
        k + "GetViewRequest.state": Leaving(
            "getView",
            {"state": state, "seat": 0, "seatToken": tokens[0]},
            (),
            "state",
            400,
            "STATE_MISSING",
            "state",
        ),
        k + "Move.card": Leaving(
            "play", play, ("move",), "card", 400, "FIELD_INVALID", "move.card"
        ),
        c + "Card.rank": Leaving(
            "play", play, ("move", "card"), "rank", 400, "FIELD_INVALID", "move.card.rank"
        ),
        c + "Card.suit": Leaving(
            "play", play, ("move", "card"), "suit", 400, "FIELD_INVALID", "move.card.suit"
        ),
    }


def post(server: ServerProcess, name: str, body: Any) -> tuple[int, Any]:
    status, _, value = exchange(
        f"{server.http_url}/v1/krypkasino:{name}", json.dumps(body).encode()
    )
    return status, value


def test_the_protos_mark_required_exactly_the_fields_a_case_leaves_out(server, json_game):
    """``(google.api.field_behavior) = REQUIRED`` in proto/ is where the list lives; each
    marked field has a case below that a real server refuses, and no other field."""
    assert set(leavings(server, json_game)) == REQUIRED_IN_REQUESTS


@pytest.mark.parametrize("name", sorted(REQUIRED_IN_REQUESTS))
def test_a_request_without_a_required_field_is_refused_and_with_it_accepted(
    server, json_game, name
):
    case = leavings(server, json_game)[name]
    request = component(REQUEST_OF[case.rpc])
    assert request.is_valid(case.body), "the whole request is valid"
    status, _ = post(server, case.rpc, case.body)
    assert status == 200, "and accepted"
    mutant = without(case.body, case.path, case.key)
    assert not request.is_valid(mutant), "the document requires the field"
    status, value = post(server, case.rpc, mutant)
    _, reason, _, violations = refusal(value)
    assert (status, reason) == (case.status, case.reason), value
    assert list(violations) == ([] if case.violation is None else [case.violation])


def with_value(body: Any, path: tuple[str | int, ...], key: str, value: Any) -> Any:
    """A copy of ``body`` with ``value`` for ``key`` in the object at ``path``."""
    mutant, target = copy_at(body, path)
    target[key] = value
    return mutant


BYTES_REQUIRED = sorted(
    name
    for name in REQUIRED_IN_REQUESTS
    if MESSAGES[name.rsplit(".", 1)[0]].fields_by_name[name.rsplit(".", 1)[1]].type
    == FieldDescriptor.TYPE_BYTES
)


@pytest.mark.parametrize("name", BYTES_REQUIRED)
def test_an_empty_required_token_is_invalid_and_refused_as_a_missing_one(server, json_game, name):
    """proto3 cannot tell an empty token from none: ``minLength`` 1 says so."""
    case = leavings(server, json_game)[name]
    mutant = with_value(case.body, case.path, case.key, "")
    assert not component(REQUEST_OF[case.rpc]).is_valid(mutant)
    status, value = post(server, case.rpc, mutant)
    assert (status, refusal(value)[1]) == (case.status, case.reason)


@dataclass(frozen=True)
class Bounded:
    """A request to ``rpc`` whose field ``key`` (in the object at ``path``) the server
    takes at each of ``inside`` (at the document's bounds) and refuses with ``reason``
    at each of ``outside`` (just past them)."""

    rpc: str
    body: dict[str, Any]
    path: tuple[str, ...]
    key: str
    inside: tuple[int, ...]
    outside: tuple[int, ...]
    reason: str


def bounded(server: ServerProcess) -> dict[str, Bounded]:
    """A case for each field of ``FIELD_BOUNDS``; seats in a 6-player game that seat 5
    leads (its dealer is seat 4, K4.3)."""
    game = rpc(server, "newGame", {"config": {"players": 6, "firstDealer": 4}, "seed": "8"})
    state, tokens = game["state"], game["seatTokens"]
    assert game["view"]["turn"] == 5
    asked = {"state": state, "seat": 5, "seatToken": tokens[5]}
    move = rpc(server, "legalMoves", asked)["moves"][0]["move"]
    k, config = "cardrules.krypkasino.v1.", ("config",)

    def seat(name: str, body: dict[str, Any], inside: tuple[int, ...]) -> Bounded:
        return Bounded(name, body, (), "seat", inside, (-1, 6), "SEAT_INVALID")

    def new_game(
        key: str, fields: dict[str, Any], inside: tuple[int, ...], outside: tuple[int, ...]
    ) -> Bounded:
        body = {"config": fields, "seed": "1"}
        return Bounded("newGame", body, config, key, inside, outside, "CONFIG_INVALID")

    return {
        k + "GameConfig.players": new_game("players", {}, (2, 6), (1, 7)),
        k + "GameConfig.first_dealer": new_game("firstDealer", {"players": 6}, (0, 5), (-1, 6)),
        # With a target score, any match_deals is a cap (K13.2), not only multiples.
        k + "GameConfig.match_deals": new_game(
            "matchDeals", {"players": 2, "targetScore": 50}, (1, 240), (0, 241)
        ),
        k + "GameConfig.target_score": new_game("targetScore", {"players": 2}, (1,), (0,)),
        k + "LegalMovesRequest.seat": seat("legalMoves", {**asked, "seat": 0}, (5,)),
        k + "PlayRequest.seat": seat("play", {**asked, "move": move}, (5,)),
        k + "GetViewRequest.seat": seat("getView", asked, (5,)),
    }


@pytest.mark.parametrize("name", sorted(FIELD_BOUNDS))
def test_a_value_past_a_documented_bound_is_invalid_and_refused_and_one_at_it_taken(server, name):
    cases = bounded(server)
    assert set(cases) == set(FIELD_BOUNDS), "a case for every bound"
    case = cases[name]
    request = component(REQUEST_OF[case.rpc])
    for value in case.inside:
        body = with_value(case.body, case.path, case.key, value)
        assert request.is_valid(body), body
        assert post(server, case.rpc, body)[0] == 200, body
    for value in case.outside:
        body = with_value(case.body, case.path, case.key, value)
        assert not request.is_valid(body), body
        status, answer = post(server, case.rpc, body)
        assert (status, refusal(answer)[1]) == (400, case.reason), answer


def test_a_request_may_leave_out_seat_0_and_getview_its_seat_token(server, json_game):
    """proto3 JSON may omit a zero: the seat then is 0, which the document must allow."""
    state, tokens = json_game["state"], json_game["seatTokens"]
    for name, body in (
        ("legalMoves", {"state": state, "seatToken": tokens[0]}),
        ("getView", {"state": state}),
    ):
        assert component(REQUEST_OF[name]).is_valid(body)
        assert post(server, name, body)[0] == 200


def test_real_refusals_are_statuses_with_typed_details(server, json_game):
    state, tokens, turn = json_game["state"], json_game["seatTokens"], json_game["view"]["turn"]
    asked = {"state": state, "seat": turn, "seatToken": tokens[turn]}
    hand = rpc(server, "getView", asked)["view"]["hand"]
    absent = next(
        {"rank": rank, "suit": suit}
        for rank in cards_pb2.Rank.keys()[1:]
        for suit in cards_pb2.Suit.keys()[1:]
        if {"rank": rank, "suit": suit} not in hand
    )
    refusals = [
        post(server, case.rpc, without(case.body, case.path, case.key))[1]
        for case in leavings(server, json_game).values()
    ]
    bodies: list[bytes] = [
        json.dumps({**asked, "move": {"card": absent}}).encode(),  # CARD_NOT_IN_HAND, metadata
        b"{",  # JSON_INVALID, a violation of the whole body (no field)
        json.dumps({"state": state, "nope": 1}).encode(),  # JSON_INVALID naming nope
        json.dumps({**asked, "seat": 9}).encode(),  # SEAT_INVALID
    ]
    for body in bodies:
        status, _, value = exchange(f"{server.http_url}/v1/krypkasino:play", body)
        assert status == 400, value
        refusals.append(value)
    status, _, value = exchange(f"{server.http_url}/v1/krypkasino:play", method="GET")
    assert status == 405
    refusals.append(value)
    check_status = component(STATUS)
    branches = SCHEMAS[STATUS]["properties"]["details"]["items"]["oneOf"]
    mapping = {
        SCHEMAS[NAMES[ref.removeprefix("#/components/schemas/")]]["properties"]["@type"][
            "const"
        ]: ref
        for ref in (branch["$ref"] for branch in branches if "$ref" in branch)
    }
    typed: set[str] = set()
    for value in refusals:
        errors = [error.message for error in check_status.iter_errors(value)]
        assert not errors, (value, errors[:3])
        refusal(value)  # exactly one ErrorInfo, maybe a BadRequest
        for detail in value["details"]:
            own = mapping[detail["@type"]]
            for other in mapping.values():  # valid as its own type only
                key = other.removeprefix("#/components/schemas/")
                valid = component(NAMES[key]).is_valid(detail)
                assert valid == (other == own), (other, detail)
            typed.add(own)
    assert typed == {"#/components/schemas/ErrorInfo", "#/components/schemas/BadRequest"}
    details = [detail for value in refusals for detail in value["details"]]
    violations = [v for detail in details for v in detail.get("fieldViolations", [])]
    assert any("field" not in v for v in violations), "a violation of the whole request"
    infos = [detail for detail in details if "reason" in detail]
    assert any("metadata" in info for info in infos) and any(
        "metadata" not in info for info in infos
    ), "metadata only when there is some"


def test_a_status_requires_its_message_and_a_violation_its_description():
    """What status_json always prints; the real refusals above show they are sent."""
    info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "X", "domain": "d"}
    check_status = component(STATUS)
    assert check_status.is_valid({"code": 3, "message": "m", "details": [info]})
    assert not check_status.is_valid({"code": 3, "details": [info]})


def test_a_status_requires_its_details():
    """Design section 5: every refusal carries an ErrorInfo with its reason
    (``ServiceError.to_status``), so ``details`` is never left out of a Status."""
    check_status = component(STATUS)
    assert not check_status.is_valid({"code": 3, "message": "m"})
    check_violation = component("google.rpc.BadRequest.FieldViolation")
    assert check_violation.is_valid({"description": "d", "reason": "R"})
    assert not check_violation.is_valid({"field": "x", "reason": "R"})
    # Every violation this release makes carries the ErrorInfo's reason, but an earlier
    # release's, answering in a rolling upgrade, leaves it out.
    assert check_violation.is_valid({"description": "d"})
