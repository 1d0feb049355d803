"""The OpenAPI document: generated from the protos, committed, valid, served."""

from __future__ import annotations

import gzip
import json
import re
import urllib.request
import uuid
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.rpc import error_details_pb2
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate

from scripts.generate_openapi import descriptor_set, generate
from service.config import ServerConfig
from service.descriptors import message_descriptor
from service.errors import ServiceError
from service.http_json import BASE64_PATTERN, parse_request
from service.http_routes import OPENAPI_PATH, Route, routes
from service.openapi import (
    COMMITTED,
    SERVICES,
    build_document,
    component_keys,
    title,
    unique_titles,
    with_short_keys,
)
from service.proto_comments import comments
from tests.service.http_helpers import exchange, refusal
from tests.service.server_process import ServerProcess


def committed() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(COMMITTED.read_text())
    return document


def operations(document: dict[str, Any]) -> Iterator[tuple[Route, dict[str, Any]]]:
    """Every RPC's route with its operation in ``document``."""
    for service in SERVICES:
        for route in routes(service):
            yield route, document["paths"][route.path][route.http_method.lower()]


def test_the_committed_document_is_what_the_generator_makes_now():
    assert generate() == COMMITTED.read_bytes(), (
        "service/cardrules.openapi.json is stale: run make generate"
    )


def test_the_document_is_valid_openapi_3_1():
    document = committed()
    assert document["openapi"] == "3.1.0"
    validate(document)


# 503: a body the server's stop cut (SERVER_STOPPING), on any route.
ANY_ROUTE = {"400", "405", "413", "415", "500", "503", "504", "505"}
# 403 needs a seat token in the request.
ERRORS_OF = {
    "NewGame": ANY_ROUTE,
    "Score": ANY_ROUTE,
    "LegalMoves": ANY_ROUTE | {"403"},
    "Play": ANY_ROUTE | {"403"},
    "GetView": ANY_ROUTE | {"403"},
}


def test_every_annotated_rpc_is_a_path_with_its_messages_and_error_responses():
    document = committed()
    schemas = document["components"]["schemas"]
    for route, operation in operations(document):
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"#/components/schemas/{route.request_class.DESCRIPTOR.name}"}
        assert ok == {"$ref": f"#/components/schemas/{route.response_class.DESCRIPTOR.name}"}
        assert set(operation["responses"]) == ERRORS_OF[route.method] | {"200"}
    for name in ("PlayBadRequest", "PermissionDenied", "RequestTooLarge", "UnsupportedMediaType"):
        response = document["components"]["responses"][name]
        assert response["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Status"
        }
    assert "GameState" not in schemas, "the internal state is not API"


def test_schemas_follow_the_proto3_json_mapping():
    schemas = committed()["components"]["schemas"]
    view = schemas["View"]["properties"]
    assert view["moveNumber"]["type"] == "string" and view["moveNumber"]["format"] == "int64"
    assert view["moveNumber"]["maxLength"] == len("-9223372036854775808")  # the least int64
    assert view["handSizes"] == {
        "type": "array",
        "items": {"type": "integer", "format": "int32", "minimum": -(2**31), "maximum": 2**31 - 1},
        "description": "Cards in each hand, in seat order.",
    }
    new_game = schemas["NewGameRequest"]["properties"]
    assert new_game["seed"]["format"] == "uint64" and new_game["seed"]["type"] == "string"
    assert new_game["seed"]["maxLength"] == len("18446744073709551615")
    state = schemas["PlayResponse"]["properties"]["state"]
    assert state == {
        "type": "string",
        "contentEncoding": "base64",
        "pattern": BASE64_PATTERN,
        "description": "The next sealed game state.",
    }
    rank = schemas["Rank"]
    assert rank["type"] == "string" and rank["enum"][:2] == ["RANK_UNSPECIFIED", "RANK_ACE"]
    assert "- `RANK_ACE`: Ace (A)." in rank["description"]
    config = schemas["GameConfigInput"]
    assert config["additionalProperties"] is False, "the server refuses unknown names"
    assert config["properties"]["matchDeals"]["description"].startswith("Number of deals;")


def walk(value: Any) -> Iterator[Any]:
    """Every dict and list inside ``value``, ``value`` first."""
    yield value
    children = value.values() if isinstance(value, dict) else value
    for child in children if isinstance(value, dict | list) else ():
        if isinstance(child, dict | list):
            yield from walk(child)


SPELLINGS = ["0", "7", "10", "-1", "123456789", "07", "00", "-0", "+1", "1e3", "7.0"]


def test_the_integer_patterns_take_what_the_gateway_takes():
    """A 64-bit integer is a string in the document; its pattern and the gateway agree on
    every spelling (the gateway holds every integer in a string to the same one)."""
    document = committed()
    patterns = {
        value["format"]: value["pattern"]
        for value in walk(document)
        if isinstance(value, dict)
        and value.get("format") in ("int64", "uint64")
        and value.get("type") == "string"
    }
    assert patterns == {"int64": "^(0|-?[1-9][0-9]*)$", "uint64": "^(0|[1-9][0-9]*)$"}
    for text in SPELLINGS:
        for pattern, body in (
            (patterns["uint64"], {"seed": text}),
            (patterns["int64"], {"config": {"firstDealer": text}}),
        ):
            try:
                parse_request(json.dumps(body).encode(), pb.NewGameRequest)
            except ServiceError as error:
                taken = error.reason != "JSON_INVALID"
            else:
                taken = True
            assert taken == bool(re.search(pattern, text)), (pattern, body)


def test_bytes_are_base64_strings_without_format_byte():
    """OpenAPI 3.1's contentEncoding; format byte made datamodel-code-generator decode the
    base64 text as UTF-8 (Base64Str), which failed on every state token."""
    document = committed()
    assert not [v for v in walk(document) if isinstance(v, dict) and v.get("format") == "byte"]
    assert sum(v.get("contentEncoding") == "base64" for v in walk(document) if isinstance(v, dict))


def schemas_reached(document: dict[str, Any], roots: list[Any]) -> set[str]:
    """The component schemas ``roots`` reach through $refs."""
    schemas = document["components"]["schemas"]
    found: set[str] = set()
    pending = list(roots)
    while pending:
        for value in walk(pending.pop()):
            if isinstance(value, dict) and "$ref" in value:
                name = value["$ref"].removeprefix("#/components/schemas/")
                if name in schemas and name not in found:
                    found.add(name)
                    pending.append(schemas[name])
    return found


def test_responses_allow_fields_a_later_release_adds_and_requests_none_unknown():
    document = committed()
    operations = [op for item in document["paths"].values() for op in item.values()]
    responses = schemas_reached(
        document, [op["responses"] for op in operations] + [document["components"]["responses"]]
    )
    requests = schemas_reached(document, [op.get("requestBody", {}) for op in operations])
    schemas = document["components"]["schemas"]
    assert "Status" in responses and "Card" in responses & requests
    assert set(schemas) == responses | requests, "no schema is unused (google.protobuf.Any)"
    for name in responses:
        closed = [
            v
            for v in walk(schemas[name])
            if isinstance(v, dict) and v.get("additionalProperties") is False
        ]
        assert not closed, name
    for name in requests - responses:
        if schemas[name]["type"] == "object":
            assert schemas[name]["additionalProperties"] is False, name


def test_every_schema_is_keyed_by_its_own_title():
    """docs/api.md "OpenAPI": openapi-typescript and @hey-api/openapi-ts name types after
    the component key, other generators classes after the title: both are the name
    without package, parents joined, so every generator makes ``NewGameRequest``."""
    schemas = committed()["components"]["schemas"]
    assert all(name == schema["title"] for name, schema in schemas.items())
    assert not [name for name in schemas if "." in name or "-" in name]
    keys = component_keys()
    assert keys["cardrules.cards.v1.Card"] == "Card"
    assert keys["cardrules.krypkasino.v1.NewGameRequest"] == "NewGameRequest"
    assert keys["cardrules.krypkasino.v1.GameConfig-Input"] == "GameConfigInput"
    assert keys["cardrules.krypkasino.v1.EventCrawled"] == "EventCrawled"
    assert keys["google.rpc.Status"] == "Status"
    assert keys["google.rpc.ErrorInfo"] == "ErrorInfo"
    assert keys["google.rpc.BadRequest.FieldViolation"] == "BadRequestFieldViolation"
    assert keys["cardrules.krypkasino.v1.TeamMode"] == "TeamMode"
    assert sorted(keys.values()) == sorted(schemas)


def test_every_reference_resolves_in_the_document():
    """Each ``$ref`` and discriminator mapping names a component there is, after the keys
    became the titles."""
    document = committed()
    refs = [v["$ref"] for v in walk(document) if isinstance(v, dict) and "$ref" in v]
    refs += [
        ref
        for v in walk(document)
        if isinstance(v, dict) and "discriminator" in v
        for ref in v["discriminator"]["mapping"].values()
    ]
    assert len(refs) > 100
    for ref in refs:
        _, components, kind, name = ref.split("/")
        assert (components, name in document["components"][kind]) == ("components", True), ref


def test_two_schemas_of_one_title_fail_the_generation():
    """The keys are the titles: two alike would make one type of two messages."""
    with pytest.raises(ValueError, match="one title"):
        unique_titles({"a.Card": {"title": "Card"}, "b.Card": {"title": "Card"}})
    document = build_document()
    schemas = document["components"]["schemas"]
    schemas["Deck"]["title"] = "Card"
    with pytest.raises(ValueError, match="the schemas Deck and Card have one title"):
        with_short_keys(document)
    with pytest.raises(ValueError, match="no component key"):
        unique_titles({"a.Card": {"title": "Card/Deck"}})


def test_a_nested_message_is_titled_with_its_parents():
    violation = message_descriptor(error_details_pb2.BadRequest.FieldViolation)
    assert title(violation) == "BadRequestFieldViolation"


def test_status_details_are_typed_by_their_type_url():
    schemas = committed()["components"]["schemas"]
    items = schemas["Status"]["properties"]["details"]["items"]
    refs = {
        "type.googleapis.com/google.rpc.ErrorInfo": "#/components/schemas/ErrorInfo",
        "type.googleapis.com/google.rpc.BadRequest": "#/components/schemas/BadRequest",
    }
    assert "anyOf" not in items, "typescript-fetch merges an anyOf's branches into one type"
    *known, other = items["oneOf"]
    assert known == [{"$ref": ref} for ref in refs.values()]
    assert "discriminator" not in items, "a mapping fails generated clients on other types"
    assert other["required"] == ["@type"]
    assert other["properties"]["@type"]["not"] == {"enum": list(refs)}
    for url, ref in refs.items():
        detail = schemas[ref.removeprefix("#/components/schemas/")]
        assert detail["properties"]["@type"]["const"] == url
        assert detail["required"][0] == "@type"
    assert schemas["ErrorInfo"]["required"] == ["@type", "reason", "domain"]
    assert schemas["ErrorInfo"]["properties"]["metadata"]["additionalProperties"] == {
        "type": "string"
    }
    assert schemas["BadRequest"]["properties"]["fieldViolations"]["items"] == {
        "$ref": "#/components/schemas/BadRequestFieldViolation"
    }
    assert "Any" not in schemas


INFO = {
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    "reason": "TOKEN_FROM_NEWER_RELEASE",
    "domain": "cardrules",
}
RETRY_INFO = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}


def test_a_refusal_with_details_a_later_release_adds_is_a_valid_status(
    server: ServerProcess,
) -> None:
    """AIP-193: a later release may add details (RetryInfo, LocalizedMessage, Help), and a
    client that validates against or is generated from today's document must take them;
    the details it knows stay checked by their schemas (a closed oneOf refused the
    RetryInfo, and a branch for any ``@type`` alone would take a malformed ErrorInfo)."""
    status, _, document = exchange(f"{server.http_url}{OPENAPI_PATH}", method="GET")
    assert status == 200
    schemas = document["components"]["schemas"]
    check = OAS31Validator({**schemas["Status"], "components": document["components"]})
    assert check.is_valid({"code": 14, "message": "m", "details": [INFO]})
    assert check.is_valid({"code": 14, "message": "m", "details": [INFO, RETRY_INFO]})
    help_link = {"@type": "type.googleapis.com/google.rpc.Help", "links": []}
    assert check.is_valid({"code": 14, "message": "m", "details": [INFO, help_link]})
    malformed = [
        {key: value for key, value in INFO.items() if key != "reason"},
        {**INFO, "metadata": {"seat": 1}},
        {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{}]},
        {"retryDelay": "1s"},
    ]
    for detail in malformed:
        assert not check.is_valid({"code": 3, "message": "m", "details": [INFO, detail]}), detail


def test_each_detail_of_a_real_refusal_is_of_exactly_one_branch(server: ServerProcess):
    """The details are a ``oneOf`` (generators make it a union, not one type requiring
    every branch's fields), so a detail valid as two branches would be refused: each
    detail the server sends, ErrorInfo alone or with a BadRequest, must match one."""
    document = committed()
    items = document["components"]["schemas"]["Status"]["properties"]["details"]["items"]
    components = {"components": document["components"]}
    check = OAS31Validator({**items, **components})
    branches = [OAS31Validator({**branch, **components}) for branch in items["oneOf"]]
    _, _, info_only = exchange(f"{server.http_url}/v1/krypkasino:play", method="GET")
    _, _, with_bad_request = exchange(f"{server.http_url}/v1/krypkasino:play", b"{")
    sent = [
        [d["@type"].rsplit(".", 1)[1] for d in v["details"]] for v in (info_only, with_bad_request)
    ]
    assert sent == [["ErrorInfo"], ["ErrorInfo", "BadRequest"]]
    details = [*info_only["details"], *with_bad_request["details"]]
    for detail in details:
        assert not [error.message for error in check.iter_errors(detail)], detail
    matched = [
        [i for i, branch in enumerate(branches) if branch.is_valid(detail)] for detail in details
    ]
    assert matched == [[0], [0], [1]], "each detail its own branch only: ErrorInfo, BadRequest"


def test_descriptions_are_the_proto_comments():
    notes = comments(descriptor_set())
    assert notes["cardrules.krypkasino.v1.KrypkasinoService.Score"].startswith(
        "Returns the itemised score sheet of every finished deal"
    )
    assert notes["cardrules.cards.v1.Suit.SUIT_CLUBS"] == "Clubs (C)."
    assert notes["cardrules.krypkasino.v1.View.state_id"] == (
        "Identifies this exact state, for optimistic concurrency: store it beside the state "
        "token and make every write of a stored state a compare-and-set on it. A state "
        "renewed under a new key keeps it; its bytes do not."
    )
    operation = committed()["paths"]["/v1/krypkasino:score"]["post"]
    assert operation["description"] == notes["cardrules.krypkasino.v1.KrypkasinoService.Score"]


def test_a_comment_s_paragraphs_stay_paragraphs_and_its_lines_are_joined():
    """service/proto_comments.py: proto comment lines are joined into paragraphs, which a blank
    comment line separates (Markdown, as OpenAPI descriptions are)."""
    notes = comments(descriptor_set())
    config = notes["cardrules.krypkasino.v1.NewGameRequest.config"]
    assert config.startswith(
        "The match configuration. Beyond each field's own range, NewGame refuses "
        "these combinations (CONFIG_INVALID, metadata flag and rule):\n\nWithout target_score, "
    )
    assert "\n\n\n" not in config and "\n" not in config.replace("\n\n", "")


def test_operation_ids_are_the_service_and_rpc_names_and_unique():
    """docs/api.md "OpenAPI": the document is for client generators, which name methods
    by ``operationId``: a change renames every generated method, two alike would clash."""
    document = committed()
    for route, operation in operations(document):
        assert operation["operationId"] == f"{operation['tags'][0]}_{route.method}", route.path
    ids = [operation["operationId"] for _, operation in all_operations(document)]
    assert len(ids) == len(set(ids))
    assert document["paths"]["/v1/krypkasino:score"]["post"]["operationId"] == (
        "KrypkasinoService_Score"
    )


def _without_descriptions(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_descriptions(v) for k, v in value.items() if k != "description"}
    if isinstance(value, list):
        return [_without_descriptions(v) for v in value]
    return value


def test_without_the_proto_sources_the_same_document_is_built_minus_comments():
    """What an installed server (no repository) serves: the runtime descriptors, no comments."""
    assert _without_descriptions(build_document()) == _without_descriptions(committed())


def test_every_call_requires_a_body_though_the_server_reads_none_as_the_empty_request(
    server: ServerProcess,
):
    """docs/api.md "OpenAPI": the body is ``required``, so a generated client cannot make
    a call without one, as the server refuses ``{}`` on every call; no body is still
    answered as ``{}`` is (a refusal of what it lacks)."""
    for route, operation in operations(committed()):
        assert operation["requestBody"]["required"] is True, route.path
        url = f"{server.http_url}{route.path}"
        none_status, _, none_value = exchange(url)
        empty_status, _, empty_value = exchange(url, b"{}")
        assert none_status == empty_status, route.path
        if none_value is not None and "details" in none_value:
            assert refusal(none_value)[:2] == refusal(empty_value)[:2], route.path


def test_the_config_limits_the_document_states_are_the_ones_the_server_enforces(
    server: ServerProcess,
):
    """What a client cannot guess from the fields: match_deals a multiple of players
    without target_score (K13.2), and the player counts four_four deals to (K16.2, K16.3)."""
    schemas = committed()["components"]["schemas"]
    config = schemas["NewGameRequest"]["properties"]["config"]
    words = " ".join(config["description"].split())
    assert "Without target_score, match_deals must be a positive multiple of players" in words
    assert "with two decks only for 5 players" in words
    assert "with single_deck, which deals on its schedule anyway, for 2, 3, 4 or 6" in words
    assert "single_deck refuses 5 players, with or without four_four" in words

    def flag_refused(config: dict[str, Any]) -> str | None:
        body = json.dumps({"config": config}).encode()
        status, _, value = exchange(f"{server.http_url}/v1/krypkasino:newGame", body)
        if status == 200:
            return None
        _, reason, metadata, _ = refusal(value)
        assert (status, reason) == (400, "CONFIG_INVALID"), value
        return metadata["flag"]

    for players in range(2, 7):
        deck = {
            "fourFour": flag_refused({"players": players, "rules": {"fourFour": True}}),
            "singleDeck": flag_refused({"players": players, "rules": {"singleDeck": True}}),
            "both": flag_refused(
                {"players": players, "rules": {"fourFour": True, "singleDeck": True}}
            ),
        }
        assert deck == {
            "fourFour": None if players == 5 else "four_four",
            "singleDeck": "single_deck" if players == 5 else None,
            "both": "single_deck" if players == 5 else None,
        }, players
        assert flag_refused({"players": players, "matchDeals": players + 1}) == "match_deals"
        assert flag_refused({"players": players, "matchDeals": 2 * players}) is None
        capped = {"players": players, "matchDeals": players + 1, "targetScore": 50}
        assert flag_refused(capped) is None


def test_the_server_serves_the_committed_document(server: ServerProcess):
    """With the caller's request id back, as the document's own operation declares."""
    fetch = urllib.request.Request(
        f"{server.http_url}{OPENAPI_PATH}", headers={"X-Request-Id": "probe-7"}
    )
    with urllib.request.urlopen(fetch, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("application/json")
        assert response.headers["X-Request-Id"] == "probe-7"
        assert response.read() == COMMITTED.read_bytes()


def test_the_415_names_every_content_coding_the_server_takes(server: ServerProcess):
    """``UnsupportedMediaType`` lists the codings a body may come in: each one the
    server takes (``x-gzip`` among them, RFC 9110's name for gzip) and none it refuses."""
    description = committed()["components"]["responses"]["UnsupportedMediaType"]["description"]
    listed = description.split("Content-Encoding other than ", 1)[1].split(".", 1)[0]
    named = set(re.findall(r"[\w-]+", listed))
    bodies = {"identity": b"{}", "deflate": zlib.compress(b"{}")}
    for coding in ("identity", "gzip", "x-gzip", "deflate", "br", "compress", "zstd"):
        status, _, value = exchange(
            f"{server.http_url}/v1/krypkasino:getView",
            bodies.get(coding, gzip.compress(b"{}")),
            headers={"Content-Type": "application/json", "Content-Encoding": coding},
        )
        assert (status != 415) == (coding in named), (coding, status, value)


@pytest.mark.parametrize(
    ("sent", "echoed"),
    [
        ("a", True),
        ("trace-7 of 9", True),
        ("~" * 128, True),
        ("~" * 129, False),
        (" padded ", True),
        ("tab\there", False),
    ],
)
def test_the_request_id_parameter_allows_what_the_server_echoes(
    server: ServerProcess, sent: str, echoed: bool
):
    """A value the X-Request-Id parameter's pattern allows comes back as sent (less the
    whitespace around it, which HTTP drops), any other is replaced, never refused."""
    parameter = committed()["components"]["parameters"]["X-Request-Id"]
    value = sent.strip(" ")
    assert bool(re.search(parameter["schema"]["pattern"], value)) is echoed
    status, headers, _ = exchange(
        f"{server.http_url}/v1/krypkasino:getView", b"{}", headers={"X-Request-Id": sent}
    )
    assert status == 400  # no state token: refused, with the request id all the same
    assert (headers["X-Request-Id"] == value) is echoed


def test_every_rpc_documents_the_optional_deadline_header():
    document = committed()
    parameter = document["components"]["parameters"]["Grpc-Timeout"]
    assert (parameter["name"], parameter["in"], parameter["required"]) == (
        "Grpc-Timeout",
        "header",
        False,
    )
    timeout = {"$ref": "#/components/parameters/Grpc-Timeout"}
    for route, operation in operations(document):
        assert operation["parameters"] == [
            {"$ref": "#/components/parameters/X-Request-Id"},
            timeout,
        ], route.path
    # The request id alone, of its own (test_a_request_id_is_said_to_be_logged_...).
    (parameter,) = document["paths"][OPENAPI_PATH]["get"]["parameters"]
    assert parameter["name"] == "X-Request-Id"


@pytest.mark.parametrize(
    ("sent", "status", "reason"),
    [
        ("30S", 400, "STATE_MISSING"),
        ("00000500m", 400, "STATE_MISSING"),
        ("1n", 504, "DEADLINE_EXCEEDED"),
        ("1.5S", 400, "TIMEOUT_INVALID"),
        ("123456789S", 400, "TIMEOUT_INVALID"),
        ("5s", 400, "TIMEOUT_INVALID"),
    ],
)
def test_the_deadline_parameter_allows_what_the_server_takes(
    server: ServerProcess, sent: str, status: int, reason: str
):
    parameter = committed()["components"]["parameters"]["Grpc-Timeout"]
    allowed = bool(re.search(parameter["schema"]["pattern"], sent))
    answer_status, _, answer = exchange(
        f"{server.http_url}/v1/krypkasino:getView", b"{}", headers={"Grpc-Timeout": sent}
    )
    assert (answer_status, refusal(answer)[1]) == (status, reason)
    assert allowed is (reason != "TIMEOUT_INVALID")


def all_operations(document: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every operation of ``document``: the RPCs' and the document's own."""
    for path, item in document["paths"].items():
        for verb, operation in item.items():
            yield f"{verb.upper()} {path}", operation


def test_the_paths_are_the_rpcs_and_the_documents_own():
    """Not the health paths: they are for probes, not client generators (docs/api.md)."""
    rpc_paths = {route.path for service in SERVICES for route in routes(service)}
    assert set(committed()["paths"]) == rpc_paths | {OPENAPI_PATH}


def resolved(document: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    """``value``, or the component its ``$ref`` names."""
    if "$ref" not in value:
        return value
    found = document
    for key in value["$ref"].removeprefix("#/").split("/"):
        found = found[key]
    return found


def test_every_operation_documents_the_optional_request_id_header():
    """In the request and in every answer (refusals' come from ``components/responses``,
    which declare it too), all with the one pattern; the document's own operation has
    its own descriptions (it is not logged), the RPCs share the components'."""
    document = committed()
    parameter = document["components"]["parameters"]["X-Request-Id"]
    assert (parameter["in"], parameter["required"]) == ("header", False)
    header = {"$ref": "#/components/headers/X-Request-Id"}
    for name, operation in all_operations(document):
        own = resolved(document, operation["parameters"][0])
        assert {**own, "description": ""} == {**parameter, "description": ""}, name
        for response in operation["responses"].values():
            headers = resolved(document, response)["headers"]
            assert resolved(document, headers["X-Request-Id"])["schema"] == {"type": "string"}
    for route, operation in operations(document):
        assert operation["parameters"][0] == {"$ref": "#/components/parameters/X-Request-Id"}, (
            route.path
        )
        assert operation["responses"]["200"]["headers"]["X-Request-Id"] == header, route.path
    for name, response in document["components"]["responses"].items():
        assert response["headers"]["X-Request-Id"] == header, name


def _says_logged(description: str) -> bool:
    """Whether a request id's description says the call's log line carries it."""
    return "logged as" in description or "the log line" in description


def test_a_request_id_is_said_to_be_logged_where_the_server_logs_its_call(
    server: ServerProcess,
):
    """docs/api.md: every RPC call and every 405 writes a request line, a GET of the
    document none. Each operation's X-Request-Id parameter, and the header of the answer
    the server gives it (and of the 405 a PUT of its path gets), say the id is logged
    exactly when the server writes the call's line; the document once said so of its own
    GET too, whose line nobody would find."""
    document = committed()
    said: dict[str, bool] = {}
    for path, item in document["paths"].items():
        for verb, operation in item.items():
            parameter = resolved(document, operation["parameters"][0])["description"]
            for method in (verb.upper(), "PUT"):
                request_id = f"said-logged-{uuid.uuid4().hex}"
                status, headers, _ = exchange(
                    f"{server.http_url}{path}",
                    b"{}" if method != "GET" else None,
                    method=method,
                    headers={"X-Request-Id": request_id},
                )
                assert headers["X-Request-Id"] == request_id, (method, path)
                answer = resolved(document, operation["responses"][str(status)])
                header = resolved(document, answer["headers"]["X-Request-Id"])["description"]
                said[request_id] = _says_logged(header)
                if method == verb.upper():
                    assert _says_logged(parameter) is said[request_id], (method, path)
    # Lines are written in the order the calls were served: once this one's has come,
    # any of the others would have.
    sentinel = f"said-logged-{uuid.uuid4().hex}"
    status, _, _ = exchange(
        f"{server.http_url}{OPENAPI_PATH}", b"{}", method="PUT", headers={"X-Request-Id": sentinel}
    )
    assert status == 405
    server.request_lines(sentinel)
    logged = {line["request_id"] for line in server.log_events("request")}
    assert {request_id: request_id in logged for request_id in said} == said
    assert not all(said.values()) and any(said.values())


def test_no_operation_needs_credentials_as_the_root_says():
    """Seat tokens travel in request bodies: the API has no security scheme, and the root
    ``security`` says so for every operation (redocly lint's ``security-defined``)."""
    document = committed()
    assert document["security"] == []
    assert "securitySchemes" not in document["components"]
    assert not [name for name, operation in all_operations(document) if "security" in operation]


def test_the_documents_own_operation_is_described_and_typed_as_an_open_object():
    """Spectral's ``operation-description``; a bare ``{"type": "object"}`` made
    openapi-typescript type the document ``Record<string, never>``."""
    operation = committed()["paths"][OPENAPI_PATH]["get"]
    assert operation["description"].startswith("This OpenAPI 3.1 document")
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema == {"type": "object", "additionalProperties": True}
    for name, each in all_operations(committed()):
        assert each.get("description"), name


def test_the_documented_servers_are_this_one_and_where_make_serve_listens():
    this_one, local = committed()["servers"]
    assert this_one["url"] == "/"  # as when no servers are given: relative to the document
    url = local["url"].format(**{k: v["default"] for k, v in local["variables"].items()})
    assert url == f"http://localhost:{ServerConfig().http_port}"


def test_every_path_documents_the_405_the_server_answers_with_its_allow_header(
    server: ServerProcess,
):
    """docs/api.md: a method a path has no route for is 405 METHOD_NOT_ALLOWED with
    ``Allow``, on the RPCs' paths and the document's own alike; the document says so."""
    document = committed()
    method_not_allowed = {"$ref": "#/components/responses/MethodNotAllowed"}
    for name, operation in all_operations(document):
        assert operation["responses"]["405"] == method_not_allowed, name
    allow = document["components"]["responses"]["MethodNotAllowed"]["headers"]["Allow"]
    assert allow["schema"] == {"type": "string"}
    for path in document["paths"]:
        status, headers, _ = exchange(f"{server.http_url}{path}", b"{}", method="PUT")
        assert (status, "Allow" in headers) == (405, True), path


def test_every_503_and_only_the_503s_document_retry_after():
    """docs/api.md: a 503 comes with ``Retry-After: 1``, which is all that tells a client
    generated from the document when to retry; no other status carries it."""
    document = committed()
    for name, operation in all_operations(document):
        for status, response in operation["responses"].items():
            if "$ref" in response:
                response = document["components"]["responses"][response["$ref"].split("/")[-1]]
            retry_after = response.get("headers", {}).get("Retry-After")
            if status == "503":
                assert retry_after is not None, name
                assert retry_after["schema"]["type"] == "integer", name
            else:
                assert retry_after is None, (name, status)


def test_a_field_with_presence_says_it_may_be_absent():
    """service/openapi.py: a field with presence may be absent (an ``optional`` scalar
    the gateway prints only when set), which its description says; oneof members say it
    through their oneof's note, messages through their schema not being required."""
    schemas = committed()["components"]["schemas"]
    noted = 0
    for name, key in component_keys().items():
        schema = schemas[key]
        try:
            descriptor = pb.DESCRIPTOR.pool.FindMessageTypeByName(name.removesuffix("-Input"))
        except KeyError:
            continue  # a wrapper of one oneof member
        if not name.startswith("cardrules.") or "properties" not in schema:
            continue  # google.rpc's, or a oneOf of wrappers (Event) which hold its members
        for field in descriptor.fields:
            oneof = field.containing_oneof  # proto3 ``optional``: a oneof "_" + its name
            optional_scalar = (
                field.has_presence
                and field.message_type is None
                and (oneof is None or oneof.name == f"_{field.name}")
            )
            description = schema["properties"][field.json_name].get("description", "")
            assert description.endswith("Optional: absent when not set.") is optional_scalar, (
                field.full_name
            )
            noted += optional_scalar
    assert noted >= 3  # NewGameRequest.seed, GameConfig.match_deals and target_score
