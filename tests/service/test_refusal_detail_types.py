"""Every detail a refusal holds is of a type of google/rpc/error_details.proto, and so will
any a later release adds (docs/api.md, "Errors"; the service's proto comment).

Over HTTP/JSON a proto3 JSON parser must resolve each detail's ``@type`` to read a
refusal into a ``google.rpc.Status``, and fails on one it cannot, whatever its option to
ignore unknown fields (a review: protobuf-es's ``fromJson`` with ``ignoreUnknownFields``;
Python's json_format likewise). The docs promised that later releases may add details
and clients must ignore them, which such a client cannot; they now promise only
error_details.proto's types, which every googleapis library holds. Here real refusals of
the gateway, and a Status holding every type of that file, parse with a parser that knows
status.proto and error_details.proto alone; without error_details.proto, or with a
detail of another type, the parse fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cardrules.cards.v1 import cards_pb2
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, duration_pb2, json_format
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from google.rpc import error_details_pb2, status_pb2

from service.openapi import COMMITTED
from tests.service.http_helpers import krypkasino_gateway, run

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api.md"
TYPE_URL = "type.googleapis.com/"
ERROR_DETAILS = error_details_pb2.DESCRIPTOR
# A state token of three bytes (TOKEN_MALFORMED, with a BadRequest), malformed JSON
# (JSON_INVALID, a violation of the whole body), a path no route has (NOT_FOUND_ROUTE,
# an ErrorInfo alone).
REQUESTS = (
    ("/v1/krypkasino:score", b'{"state": "AAAA"}'),
    ("/v1/krypkasino:newGame", b"{"),
    ("/v1/krypkasino:nope", b"{}"),
)


def pool_of(*files: Any) -> descriptor_pool.DescriptorPool:
    """A pool of these files alone (each after its imports), as a client's registry."""
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(file.serialized_pb))
    return pool


WITH_DETAILS = pool_of(
    any_pb2.DESCRIPTOR, duration_pb2.DESCRIPTOR, status_pb2.DESCRIPTOR, ERROR_DETAILS
)
STATUS_ALONE = pool_of(any_pb2.DESCRIPTOR, status_pb2.DESCRIPTOR)


def parse_status(text: str, pool: descriptor_pool.DescriptorPool) -> Message:
    status = GetMessageClass(pool.FindMessageTypeByName("google.rpc.Status"))()
    return json_format.Parse(text, status, ignore_unknown_fields=True, descriptor_pool=pool)


@pytest.fixture(scope="module")
def refusals() -> list[str]:
    """The bodies of the gateway's refusals of ``REQUESTS``."""
    bodies: list[str] = []

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        for path, body in REQUESTS:
            headers = {"Content-Type": "application/json"}
            async with session.post(f"{url}{path}", data=body, headers=headers) as response:
                assert response.status >= 400
                bodies.append(await response.text())

    run(krypkasino_gateway(), scenario)
    return bodies


def test_every_detail_of_a_refusal_is_an_error_details_type(refusals: list[str]) -> None:
    types = {detail["@type"] for body in refusals for detail in json.loads(body)["details"]}
    assert types == {f"{TYPE_URL}google.rpc.ErrorInfo", f"{TYPE_URL}google.rpc.BadRequest"}
    known = {
        f"{TYPE_URL}{message.full_name}" for message in ERROR_DETAILS.message_types_by_name.values()
    }
    assert types <= known


def test_a_parser_that_knows_error_details_reads_every_refusal(refusals: list[str]) -> None:
    for body in refusals:
        status = parse_status(body, WITH_DETAILS)
        assert json_format.MessageToDict(status, descriptor_pool=WITH_DETAILS) == json.loads(body)


def test_a_parser_that_lacks_error_details_fails(refusals: list[str]) -> None:
    with pytest.raises(json_format.ParseError, match="Can not find message descriptor"):
        parse_status(refusals[0], STATUS_ALONE)


def later_status(refusal: str, extra: Message) -> str:
    """``refusal`` with ``extra`` appended to its details, as a later release might."""
    status = status_pb2.Status()
    json_format.Parse(refusal, status)
    status.details.add().Pack(extra)
    return json_format.MessageToJson(status)


@pytest.mark.parametrize("name", sorted(ERROR_DETAILS.message_types_by_name))
def test_a_detail_of_any_error_details_type_parses(refusals: list[str], name: str) -> None:
    """Whichever of them a later release adds, the same parser reads it."""
    detail = GetMessageClass(ERROR_DETAILS.message_types_by_name[name])()
    status = parse_status(later_status(refusals[0], detail), WITH_DETAILS)
    printed = json_format.MessageToDict(status, descriptor_pool=WITH_DETAILS)
    assert printed["details"][-1]["@type"] == f"{TYPE_URL}google.rpc.{name}"


def test_a_detail_of_another_type_fails_even_ignoring_unknown_fields(refusals: list[str]) -> None:
    """Why the service keeps to error_details.proto: the option does not help here."""
    other = cards_pb2.Card(rank=cards_pb2.RANK_ACE, suit=cards_pb2.SUIT_SPADES)
    with pytest.raises(json_format.ParseError, match="Can not find message descriptor"):
        parse_status(later_status(refusals[0], other), WITH_DETAILS)


def test_the_docs_promise_error_details_types_and_say_how_to_register_them() -> None:
    errors = " ".join(API.read_text(encoding="utf-8").split("\n## Errors\n", 1)[1].split())
    for needed in (
        "only of the types of google/rpc/error_details.proto",
        "never one of its own",
        "google.rpc.error_details_pb2",
        "Can not find message descriptor by type_url",
    ):
        assert needed in errors, needed


def test_the_openapi_status_schema_makes_the_same_promise() -> None:
    """The OpenAPI document's ``Status``, written by hand in service/openapi.py, kept the
    promise the docs withdrew (any type a later release adds) after they changed."""
    document = json.loads(COMMITTED.read_text("utf-8"))
    status = document["components"]["schemas"]["Status"]
    texts = (status["description"], status["properties"]["details"]["description"])
    for text in texts:
        assert "google/rpc/error_details.proto" in text, text
    assert "fails on a detail whose @type it cannot resolve" in texts[0]
