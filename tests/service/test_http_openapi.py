"""The OpenAPI document: generated from the protos, committed, valid, served (issue 4)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from openapi_spec_validator import validate

from scripts.generate_openapi import descriptor_set, generate
from service.http_routes import routes
from service.openapi import COMMITTED, SERVICES, build_document, comments
from tests.service.server_process import ServerProcess


def committed() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(COMMITTED.read_text())
    return document


def test_the_committed_document_is_what_the_generator_makes_now():
    assert generate() == COMMITTED.read_bytes(), (
        "service/cardrules.openapi.json is stale: run make generate"
    )


def test_the_document_is_valid_openapi_3_1():
    document = committed()
    assert document["openapi"] == "3.1.0"
    validate(document)


def test_every_annotated_rpc_is_a_path_with_its_messages_and_error_responses():
    document = committed()
    schemas = document["components"]["schemas"]
    for service in SERVICES:
        for route in routes(service):
            operation = document["paths"][route.path][route.http_method.lower()]
            body = operation["requestBody"]["content"]["application/json"]["schema"]
            ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
            assert body["$ref"].endswith(route.request_class.DESCRIPTOR.full_name)
            assert ok["$ref"].endswith(route.response_class.DESCRIPTOR.full_name)
            assert set(operation["responses"]) == {"200", "400", "403", "405", "413", "415", "500"}
    for name in ("BadRequest", "PermissionDenied", "RequestTooLarge", "UnsupportedMediaType"):
        response = document["components"]["responses"][name]
        assert response["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/google.rpc.Status"
        }
    assert "cardrules.krypkasino.v1.GameState" not in schemas, "the internal state is not API"


def test_schemas_follow_the_proto3_json_mapping():
    schemas = committed()["components"]["schemas"]
    view = schemas["cardrules.krypkasino.v1.View"]["properties"]
    assert view["moveNumber"]["type"] == "string" and view["moveNumber"]["format"] == "int64"
    assert view["handSizes"] == {
        "type": "array",
        "items": {"type": "integer", "format": "int32", "minimum": -(2**31), "maximum": 2**31 - 1},
        "description": "Cards in each hand, in seat order.",
    }
    new_game = schemas["cardrules.krypkasino.v1.NewGameRequest"]["properties"]
    assert new_game["seed"]["format"] == "uint64" and new_game["seed"]["type"] == "string"
    state = schemas["cardrules.krypkasino.v1.PlayResponse"]["properties"]["state"]
    assert state["format"] == "byte" and state["contentEncoding"] == "base64"
    rank = schemas["cardrules.cards.v1.Rank"]
    assert rank["type"] == "string" and rank["enum"][:2] == ["RANK_UNSPECIFIED", "RANK_ACE"]
    assert "- `RANK_ACE`: Ace (A)." in rank["description"]
    config = schemas["cardrules.krypkasino.v1.GameConfig"]
    assert config["additionalProperties"] is False
    assert config["properties"]["matchDeals"]["description"].startswith("Number of deals;")


def test_descriptions_are_the_proto_comments():
    notes = comments(descriptor_set())
    assert notes["cardrules.krypkasino.v1.KrypkasinoService.Score"].startswith(
        "Returns the itemised score sheet of every finished deal"
    )
    assert notes["cardrules.cards.v1.Suit.SUIT_CLUBS"] == "Clubs (C)."
    assert notes["cardrules.krypkasino.v1.View.state_id"] == (
        "Identifies this exact state, for optimistic concurrency."
    )
    operation = committed()["paths"]["/v1/krypkasino:score"]["post"]
    assert operation["description"] == notes["cardrules.krypkasino.v1.KrypkasinoService.Score"]


def _without_descriptions(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_descriptions(v) for k, v in value.items() if k != "description"}
    if isinstance(value, list):
        return [_without_descriptions(v) for v in value]
    return value


def test_without_the_proto_sources_the_same_document_is_built_minus_comments():
    """What an installed server (no repository) serves: the runtime descriptors, no comments."""
    assert _without_descriptions(build_document()) == _without_descriptions(committed())


def test_the_server_serves_the_committed_document(server: ServerProcess):
    with urllib.request.urlopen(f"{server.http_url}/openapi.json", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("application/json")
        assert response.read() == COMMITTED.read_bytes()
