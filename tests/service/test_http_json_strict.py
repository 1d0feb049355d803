"""What the HTTP/JSON gateway refuses beyond json_format (design section 5, docs/api.md).

A field given under both its names (``seat_token`` and ``seatToken``) is one
field given twice; bytes must be base64 (standard or URL-safe, padding
optional) rather than whatever json_format's forgiving decoder makes of them;
a value of the wrong JSON type is refused in words, not Python's. Each is
``JSON_INVALID`` naming the field by its proto path, at any depth. Also the
CORS origins, compared as browsers send them.
"""

from __future__ import annotations

import base64
import codecs
import gzip
import itertools
import json
import re
import sys
from typing import Any

import aiohttp
import pytest
from cardrules.cards.v1 import cards_pb2
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, struct_pb2
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from service.errors import ServiceError
from service.http_cors import CorsPolicy, normal_origin, parse_origins
from service.http_json import BASE64_PATTERN, _base64_problem, message_json, parse_request
from tests.service.http_helpers import (
    exchange,
    krypkasino_gateway,
    preflight_headers,
    refusal,
    rpc,
    run,
)
from tests.service.server_process import ServerProcess

# What parse_origins says of anything else (the setting is named by service.config).
NOT_AN_ORIGIN = r"^must be an origin like https://example\.com\[:port\], not '"
# How a refusal words an enum number that no 32-bit integer holds.
ENUM_NUMBER_WORDS = "an enum number of 32 bits (-2147483648 to 2147483647)"


def refused_field(server: ServerProcess, route: str, body: dict[str, Any]) -> str:
    """The one field violation of a ``JSON_INVALID`` refusal of ``body``."""
    status, _, value = exchange(
        f"{server.http_url}/v1/krypkasino:{route}", json.dumps(body).encode()
    )
    code, reason, _, violations = refusal(value)
    assert (status, code, reason) == (400, 3, "JSON_INVALID"), value
    (field,) = violations
    return field


def violation(error: ServiceError) -> tuple[str, str]:
    """The field and description of a ``JSON_INVALID``'s one violation, whose message is
    ``field: description`` (docs/api.md, "Errors"), ``description`` for the whole body."""
    assert error.reason == "JSON_INVALID"
    (only,) = error.violations
    assert error.message == (f"{only.field}: " if only.field else "") + only.description
    return only.field, only.description


def refusal_of(body: bytes, message_class: type[Message]) -> tuple[str, str]:
    with pytest.raises(ServiceError) as refused:
        parse_request(body, message_class)
    return violation(refused.value)


# -- the size of what a body holds ----------------------------------------------------------


def test_values_that_must_pass_the_limit_as_protobuf_are_refused_before_parsing() -> None:
    """Each message is at least a tag and a length: the move and its 4 cards need 10 bytes."""
    body = b'{"move": {"captures": [{}, {}, {}, {"rank": "X"}]}}'
    with pytest.raises(ServiceError) as refused:
        parse_request(body, pb.PlayRequest, 7)
    assert (refused.value.reason, refused.value.metadata) == ("REQUEST_TOO_LARGE", {"limit": "7"})
    assert refusal_of(body, pb.PlayRequest)[0] == "move.captures[3].rank"  # with room to spare
    three_cards = b'{"move": {"captures": [{}, {}, {}]}}'
    assert parse_request(three_cards, pb.PlayRequest, 8).ByteSize() == 8
    with pytest.raises(ServiceError, match="larger than 7 bytes"):
        parse_request(three_cards, pb.PlayRequest, 7)
    # A field given counts as set, at its default too: parsing it costs the same.
    unset = b'{"move": {"card": {"rank": "RANK_UNSPECIFIED", "suit": "SUIT_UNSPECIFIED"}}}'
    assert parse_request(unset, pb.PlayRequest).ByteSize() == 4
    assert parse_request(unset, pb.PlayRequest, 8).ByteSize() == 4
    with pytest.raises(ServiceError, match="larger than 7 bytes"):
        parse_request(unset, pb.PlayRequest, 7)


def test_a_refused_field_after_a_valid_list_is_named_not_the_list() -> None:
    body = b'{"move": {"captures": [{"rank": "RANK_TWO", "suit": "SUIT_CLUBS"}], "card": {"rank": "X"}}}'
    assert refusal_of(body, pb.PlayRequest)[0] == "move.card.rank"


@pytest.mark.parametrize("bad", [0, 1, 700, 4095])
def test_a_bad_element_of_a_long_list_is_found_by_halving_the_list(bad, monkeypatch):
    """Not by parsing each element alone: 350,000 cards took 5 s that way."""
    children: list[dict[str, object]] = [{"counts": [1]}] * 4096
    # A value only json_format refuses: the walk before it leaves floats to it.
    children[bad] = {"ratio": "abc"}
    body = json.dumps({"children": children}).encode()
    parses = 0
    real_parse = json_format.ParseDict

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal parses
        parses += 1
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(json_format, "ParseDict", counted)
    assert refusal_of(body, scalars_class())[0] == f"children[{bad}].ratio"
    assert 12 <= parses <= 2 * 12 + 8  # one or two per halving of 4,096 elements, a few per field


@pytest.mark.parametrize(
    "given",
    ['{"rank": "0", "suit": "0"}', '{"rank": null, "suit": null}', '{"rank": 0}'],
    ids=["zeros", "nulls", "one_zero"],
)
def test_cards_at_their_default_count_as_given(given: str) -> None:
    """A review's 2 KB of gzip, 32,000 such cards, cost 0.55 s to refuse when they counted
    2 bytes each: now 6 (4 for one field), as a card of a real rank and suit."""
    body = ('{"move": {"captures": [' + ",".join([given] * 1000) + "]}}").encode()
    each = 4 if given.count(":") == 1 else 6
    assert parse_request(body, pb.PlayRequest, 2 + 1000 * each + 2)
    with pytest.raises(ServiceError) as refused:
        parse_request(body, pb.PlayRequest, 1000 * each)
    # Over gRPC the same request would pass: the message says what was counted.
    assert (refused.value.reason, refused.value.message) == (
        "REQUEST_TOO_LARGE",
        f"the request (each value given counted as set) is larger than {1000 * each} bytes",
    )


def test_an_empty_list_counts_as_a_field_given() -> None:
    """An element ``{"cards": []}`` costs 4, 2 for itself and 2 for its empty list, as the
    floor's every member costs at least 2 (a mutation review found no test of it)."""
    body = ('{"decks": [' + ",".join(['{"cards": []}'] * 1000) + "]}").encode()
    assert parse_request(body, pb.NewGameRequest, 4000)
    with pytest.raises(ServiceError) as refused:
        parse_request(body, pb.NewGameRequest, 3999)
    assert refused.value.reason == "REQUEST_TOO_LARGE"


@pytest.mark.parametrize(
    "body",
    [
        b'{"x": [' + b",".join([b"0"] * 40_000) + b"]}",
        b'{"move": {"captures": [' + b",".join([b'{"rank": "0", "suit": "0"}'] * 10_000) + b"]}}",
        b'{"state": "' + b":" * 40_000 + b'"}',
    ],
    ids=["numbers_under_an_unknown_name", "cards", "colons_in_a_string"],
)
def test_a_body_of_more_separators_than_the_limit_is_refused_unparsed(
    body: bytes, monkeypatch
) -> None:
    """Each , and : begins a member or element, which the floor counts: a megabyte of
    [0,0,...] under an unknown name cost json.loads 0.1 s before the name was read."""

    def parsed(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("json.loads read the body")

    monkeypatch.setattr(json, "loads", parsed)
    with pytest.raises(ServiceError) as refused:
        parse_request(body, pb.PlayRequest, 32_768)
    assert (refused.value.reason, refused.value.metadata) == (
        "REQUEST_TOO_LARGE",
        {"limit": "32768"},
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [("seed", "18446744073709551616"), ("seed", -1), ("players", 2**31), ("players", -(2**31) - 1)],
)
def test_an_integer_out_of_range_is_refused_by_the_walk_naming_the_range(
    field: str, value: object, monkeypatch
) -> None:
    """Before json_format parses the whole body (and offending_field again): 32,000 empty
    cards before a players of 99999999999 cost 0.17 s."""

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("json_format parsed the body")

    monkeypatch.setattr(json_format, "ParseDict", refused)
    request = {"seed": value} if field == "seed" else {"config": {"players": value}}
    path, bounds = (
        ("seed", "0 to 18446744073709551615")
        if field == "seed"
        else ("config.players", "-2147483648 to 2147483647")
    )
    assert refusal_of(json.dumps(request).encode(), pb.NewGameRequest) == (
        path,
        f"must be {bounds}, not {value}",
    )


@pytest.mark.parametrize(
    ("body", "request_class", "hint"),
    [
        (b'{"players": 2}', pb.NewGameRequest, "config.players"),
        (b'{"matchDeals": 2}', pb.NewGameRequest, "config.match_deals"),
        (b'{"config": {"singleDeck": true}}', pb.NewGameRequest, "config.rules.single_deck"),
        (b'{"card": {"rank": 2}}', pb.PlayRequest, "move.card"),
    ],
)
def test_a_field_given_a_level_too_high_is_refused_with_where_it_goes(
    body: bytes, request_class: type[Message], hint: str
) -> None:
    """The client's ``new_game(players=2)`` is no JSON body: a newcomer's likely slip."""
    _, description = refusal_of(body, request_class)
    assert description.endswith(f"; did you mean {hint}?"), description


@pytest.mark.parametrize(
    ("body", "request_class", "description"),
    [
        (
            b'{"config": {"players": 2, "rules": {"bordstabe": true}}}',
            pb.NewGameRequest,
            "config.rules has no such field; did you mean config.rules.bordstabbe?",
        ),
        (
            b'{"config": {"player": 2}}',
            pb.NewGameRequest,
            "config has no such field; did you mean config.players?",
        ),
        (
            b'{"config": {"Players": 2}}',
            pb.NewGameRequest,
            "config has no such field; did you mean config.players?",
        ),
        (
            b'{"seattoken": "AA"}',
            pb.PlayRequest,
            "the request has no such field; did you mean seat_token?",
        ),
        (
            b'{"states": "AA"}',
            pb.ScoreRequest,
            "the request has no such field; did you mean state?",
        ),
        # At the edge of the likeness asked (0.89), and a long name's slip.
        (
            b'{"config": {"team": "TEAM_MODE_PAIRS"}}',
            pb.NewGameRequest,
            "config has no such field; did you mean config.teams?",
        ),
        (
            b'{"config": {"rules": {"last_capture_pont": true}}}',
            pb.NewGameRequest,
            "config.rules has no such field; did you mean config.rules.last_capture_point?",
        ),
        # No field is near: no guess.
        (b'{"seed": 1}', pb.LegalMovesRequest, "the request has no such field"),
        (b'{"x" : 1}', pb.PlayRequest, "the request has no such field"),
    ],
)
def test_a_misspelt_field_is_refused_naming_the_nearest_field(
    body: bytes, request_class: type[Message], description: str
) -> None:
    assert refusal_of(body, request_class)[1] == description


_TEN_OF_HEARTS = {"rank": "RANK_TEN", "suit": "SUIT_HEARTS"}
_LEGAL_MOVE = {"move": {"card": _TEN_OF_HEARTS}, "kind": "MOVE_KIND_CRAWL", "cardPoints": 1}
_SEND_ITS_MOVE = (
    "; a LegalMove has it: did you mean to send only the LegalMove's move "
    "(moves[i].move of the LegalMoves answer) as move?"
)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        # A whole LegalMove, as LegalMoves lists it, posted as Play's move.
        ({"move": _LEGAL_MOVE}, "move.move"),
        ({"move": dict(reversed(_LEGAL_MOVE.items()))}, "move.cardPoints"),
        # A LegalMove's fields beside the move's own.
        ({"move": {"card": _TEN_OF_HEARTS, "kind": "MOVE_KIND_CRAWL"}}, "move.kind"),
        ({"move": {"card": _TEN_OF_HEARTS, "card_points": 0}}, "move.card_points"),
        # A LegalMove spread into the request beside its state and seat.
        ({"state": "AA==", "seat": 1, **_LEGAL_MOVE}, "kind"),
    ],
)
def test_a_legal_move_posted_whole_as_play_s_move_is_told_to_send_its_move(
    body: dict[str, Any], field: str
) -> None:
    """What LegalMoves lists is a LegalMove, whose ``move`` is what Play takes: a UI that
    posts the element whole is told so, not only that the field is unknown."""
    *owner, _ = field.split(".")
    assert refusal_of(json.dumps(body).encode(), pb.PlayRequest) == (
        field,
        f"{'.'.join(owner) or 'the request'} has no such field{_SEND_ITS_MOVE}",
    )


def test_a_lone_message_of_an_answer_posted_whole_gets_no_hint() -> None:
    """A View (NewGame's answer holds one, and it holds the GameConfig NewGame takes)
    posted whole as ``config`` is no element of a list a client picks from: the refusal
    names the field alone, with no "did you mean to send only the View's config"."""
    body = {"config": {"config": {"players": 2}, "hand": []}}
    assert refusal_of(json.dumps(body).encode(), pb.NewGameRequest) == (
        "config.config",
        "config has no such field",
    )


def test_a_legal_move_of_the_servers_answer_posted_whole_gets_the_hint(server, json_game):
    """Over a real server: the first LegalMove of a LegalMoves answer, posted as Play's
    move, is refused JSON_INVALID naming ``move.move``, and the message says to send
    ``moves[i].move``; posting that move plays it."""
    seat = json_game["view"]["turn"]
    asked = {"state": json_game["state"], "seat": seat, "seatToken": json_game["seatTokens"][seat]}
    (first, *_) = rpc(server, "legalMoves", asked)["moves"]
    status, _, value = exchange(
        f"{server.http_url}/v1/krypkasino:play", json.dumps({**asked, "move": first}).encode()
    )
    code, reason, _, violations = refusal(value)
    assert (status, code, reason, list(violations)) == (400, 3, "JSON_INVALID", ["move.move"])
    assert value["message"] == f"move.move: move has no such field{_SEND_ITS_MOVE}"
    assert rpc(server, "play", {**asked, "move": first["move"]})["view"]["moveNumber"] == "1"


def test_an_unknown_name_is_refused_by_the_walk_without_parsing_the_body(monkeypatch):
    """json_format would refuse it only after parsing the whole body, and finding it
    would take two more parses: 1.5 s for a body of 32,000 cards."""
    cards: list[dict[str, object]] = [{"rank": "RANK_TWO"}] * 4096
    cards[700] = {"rank": "RANK_TWO", "bogus": 1}
    body = json.dumps({"move": {"captures": cards}}).encode()

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("json_format parsed the body")

    monkeypatch.setattr(json_format, "ParseDict", refused)
    assert refusal_of(body, pb.PlayRequest) == (
        "move.captures[700].bogus",
        "move.captures[700] has no such field",
    )


# -- one field under both its names ---------------------------------------------------------


@pytest.mark.parametrize("seat_token_first", [True, False])
def test_a_seat_token_under_both_names_is_refused_whichever_comes_last(
    server, json_game, seat_token_first
):
    """Last-one-wins let a request carry one seat's token for the server and another
    for a reviewer or proxy that reads the other spelling."""
    own, other = json_game["seatTokens"][0], json_game["seatTokens"][1]
    names = [("seat_token", other), ("seatToken", own)]
    if not seat_token_first:
        names.reverse()
    body = {"state": json_game["state"], "seat": 0, **dict(names)}
    assert refused_field(server, "getView", body) == "seat_token"


def test_a_nested_field_under_both_names_is_refused_with_its_path(server):
    body = {"config": {"players": 2, "first_dealer": 1, "firstDealer": 0}}
    assert refused_field(server, "newGame", body) == "config.first_dealer"
    field, description = refusal_of(json.dumps(body).encode(), pb.NewGameRequest)
    assert field == "config.first_dealer"
    assert "first_dealer" in description and "firstDealer" in description


def strict_proto_file(name: str) -> descriptor_pb2.FileDescriptorProto:
    """An empty proto3 file ``test/<name>.proto`` of package ``test.strict.v1`` that may
    use ``google.protobuf.Struct`` and ``Value``."""
    return descriptor_pb2.FileDescriptorProto(
        name=f"test/{name}.proto",
        package="test.strict.v1",
        syntax="proto3",
        dependency=[struct_pb2.DESCRIPTOR.name],
    )


def strict_message_class(file: descriptor_pb2.FileDescriptorProto, name: str) -> type[Message]:
    """The class of message ``name`` of ``file`` (``strict_proto_file``), in a pool of its own."""
    pool = descriptor_pool.DescriptorPool()
    struct_file = descriptor_pb2.FileDescriptorProto()
    struct_pb2.DESCRIPTOR.CopyToProto(struct_file)
    pool.Add(struct_file)
    pool.Add(file)
    return GetMessageClass(pool.FindMessageTypeByName(f"test.strict.v1.{name}"))


def holder_class() -> type[Message]:
    """A request with what the krypkasino requests lack: two-word fields inside repeated
    messages and map values, bytes in a map, and a well-known type (Struct)."""
    file = strict_proto_file("strict_holder")
    one, many = FieldDescriptor.LABEL_OPTIONAL, FieldDescriptor.LABEL_REPEATED
    text, data, message = (
        FieldDescriptor.TYPE_STRING,
        FieldDescriptor.TYPE_BYTES,
        FieldDescriptor.TYPE_MESSAGE,
    )
    item = file.message_type.add(name="Item")
    item.field.add(name="item_name", number=1, type=text, label=one, json_name="itemName")
    item.field.add(name="item_data", number=2, type=data, label=one, json_name="itemData")
    holder = file.message_type.add(name="Holder")
    holder.field.add(
        name="items", number=1, type=message, label=many, type_name=".test.strict.v1.Item"
    )

    def add_map(name: str, number: int, value: dict[str, Any], **field: str) -> None:
        """A ``map<string, value>`` field: its entry message, then the repeated field."""
        entry_name = "".join(part.title() for part in name.split("_")) + "Entry"
        entry = holder.nested_type.add(name=entry_name)
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=text, label=one)
        entry.field.add(name="value", number=2, label=one, **value)
        holder.field.add(
            name=name,
            number=number,
            type=message,
            label=many,
            type_name=f".test.strict.v1.Holder.{entry_name}",
            **field,
        )

    add_map(
        "by_name", 2, {"type": message, "type_name": ".test.strict.v1.Item"}, json_name="byName"
    )
    add_map("blobs", 3, {"type": data})
    holder.field.add(
        name="meta", number=4, type=message, label=one, type_name=".google.protobuf.Struct"
    )
    return strict_message_class(file, "Holder")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"items": [{}, {"itemName": "a", "item_name": "b"}]}, "items[1].item_name"),
        ({"byName": {"k": {"item_data": "AA==", "itemData": "AA=="}}}, 'by_name["k"].item_data'),
        ({"items": [], "byName": {}, "by_name": {}}, "by_name"),
    ],
)
def test_both_names_in_repeated_messages_and_maps_are_refused_with_their_path(body, field):
    assert refusal_of(json.dumps(body).encode(), holder_class())[0] == field


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            b'{"decks": [{"cards": [{"rank": 1}, {"rank": 1, "suit": 1, "suit": 2}]}]}',
            "decks[0].cards[1].suit",
        ),
        (b'{"config": {"players": 2, "firstDealer": 1, "firstDealer": 0}}', "config.first_dealer"),
        (b'{"seed": "1", "seed": "2"}', "seed"),
        (b'{"config": {"bogus": 1, "bogus": 2}}', "config.bogus"),
    ],
)
def test_the_same_name_twice_is_refused_with_its_path(body: bytes, field: str) -> None:
    assert refusal_of(body, pb.NewGameRequest) == (field, "appears twice")


def test_a_well_known_type_is_parsed_whole_when_the_refused_field_is_sought() -> None:
    """A Struct's keys are its own, not fields: the refusal names the unknown field."""
    body = b'{"meta": {"a": 1}, "unknownField": 1}'
    assert refusal_of(body, holder_class())[0] == "unknownField"


@pytest.mark.parametrize(
    ("body", "field", "description"),
    [
        (
            b'{"config": {"player": 2}}',
            "config.player",
            "config has no such field; did you mean config.players?",
        ),
        (b'{"config": {"a.b": 1}}', "config.a.b", 'config has no field "a.b"'),
        (b'{"": 1}', '""', 'the request has no field ""'),
        (b'{"config": {"": 1}}', 'config.""', 'config has no field ""'),
        (b'{"": 1, "": 2}', '""', 'the name "" appears twice'),
        (b'{".seed": 1}', ".seed", 'the request has no field ".seed"; did you mean seed?'),
        (b'{"config": {"a b": 1, "a b": 2}}', "config.a b", 'the name "a b" appears twice'),
        (b'{"config": {"bogus": 1, "bogus": 2}}', "config.bogus", "appears twice"),
    ],
)
def test_a_name_the_path_would_not_show_plainly_is_quoted_in_the_why(
    body: bytes, field: str, description: str
) -> None:
    """docs/api.md, "Errors": the message is ``path: why`` (``violation`` checks it), and
    a why need not repeat a plain name; ``config.a.b`` alone would read as a field ``b``
    of ``config.a``. An empty name is ``""`` in the path, since an empty path is the
    whole request, and a leading dot is kept (``.seed`` is no ``seed``)."""
    assert refusal_of(body, pb.NewGameRequest) == (field, description)


def test_the_same_map_key_twice_is_refused_with_its_path() -> None:
    body = b'{"byName": {"k": {}, "k": {}}}'
    assert refusal_of(body, holder_class()) == (
        'by_name["k"]',
        "the key appears twice",
    )


def test_the_same_name_twice_where_no_field_is_known_is_still_refused() -> None:
    body = b'{"meta": {"a": 1, "a": 2}}'  # a Struct's keys are no fields
    assert refusal_of(body, holder_class()) == ("", 'the name "a" appears twice')


# Long, but no run of base64 as long as a seat token's text, which is not quoted at all
# (tests/service/test_http_token_echo.py).
LONG = "x " * 50_000


@pytest.mark.parametrize(
    ("body", "field_start", "description_start"),
    [
        (f'{{"{LONG}": 1}}', LONG[:50], 'the request has no field "x x'),
        (f'{{"bogus": {{"{LONG}": 1, "{LONG}": 2}}}}', "bogus", "the request has no such field"),
        (f'{{"config": {{"players": 2, "teams": "{LONG}"}}}}', "config.teams", "must be one of"),
        (
            f'{{"config": {{"players": "{"9" * 100_000}"}}}}',
            "config.players",
            "must be -2147483648 to 2147483647, not 9999",
        ),
        (f'{{"config": {{"players": 2, "{LONG}": 1}}}}', "config.x x", 'config has no field "x x'),
    ],
)
def test_a_refusal_quotes_at_most_a_few_hundred_characters_of_what_was_sent(
    body: str, field_start: str, description_start: str
) -> None:
    """A kilobyte of gzip can carry a megabyte-long name or value; the answer is short.
    The message, ``field: description`` (``violation``), keeps its why after a long path."""
    field, description = refusal_of(body.encode(), pb.NewGameRequest)
    assert field.startswith(field_start) and description.startswith(description_start)
    assert len(field) <= 403 and len(description) <= 403


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_numbers_that_json_does_not_have_are_malformed_json(constant: str) -> None:
    body = f'{{"config": {{"players": {constant}}}}}'.encode()
    assert refusal_of(body, pb.NewGameRequest) == (
        "",
        f"malformed JSON: {constant} is not a JSON value",
    )


def test_a_body_that_is_no_utf8_is_refused_and_one_of_gzip_data_says_what_to_send() -> None:
    """A gzip body sent without ``Content-Encoding`` reaches the JSON parser as it is."""
    not_utf8 = "the body is not UTF-8: invalid start byte"
    assert refusal_of(b'{"seat": "\xff"}', pb.GetViewRequest) == ("", not_utf8)
    assert refusal_of(gzip.compress(b'{"seat": 1}'), pb.GetViewRequest) == (
        "",
        f"{not_utf8}; it looks gzip-compressed: send Content-Encoding: gzip",
    )


def test_a_byte_order_mark_is_ignored_at_the_start_only() -> None:
    """RFC 8259 8.1 lets a parser ignore one; PowerShell's ``Out-File`` writes one."""
    bom = codecs.BOM_UTF8
    assert parse_request(bom + b'{"seat": 1}', pb.GetViewRequest) == pb.GetViewRequest(seat=1)
    assert parse_request(bom + b" \n", pb.GetViewRequest) == pb.GetViewRequest()
    field, description = refusal_of(b'{"seat": 1}' + bom, pb.GetViewRequest)
    assert field == "" and description.startswith("malformed JSON: Extra data")
    field, description = refusal_of(bom + bom + b"{}", pb.GetViewRequest)
    assert field == "" and description.startswith("malformed JSON: Unexpected UTF-8 BOM")


@pytest.mark.parametrize(
    ("body", "kind"), [(b"null", "null"), (b"[]", "an array"), (b"7", "a number")]
)
def test_a_body_that_is_no_object_is_named_in_json_words(body: bytes, kind: str) -> None:
    assert refusal_of(body, pb.NewGameRequest) == (
        "",
        f"the body must be a JSON object, not {kind}",
    )


# -- bytes are base64 ---------------------------------------------------------------------


def with_star(token: str) -> str:
    middle = len(token) // 2
    return token[:middle] + "*" + token[middle:]


def whole_quanta(token: str) -> str:
    """``token`` cut to whole groups of four characters, unpadded."""
    data = token.rstrip("=")
    return data[: len(data) // 4 * 4]


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("score", lambda g: {"state": "!!!"}, "state"),
        ("score", lambda g: {"state": with_star(g["state"])}, "state"),
        ("score", lambda g: {"state": whole_quanta(g["state"]) + "="}, "state"),
        ("score", lambda g: {"state": "AA="}, "state"),
        ("score", lambda g: {"state": "AAAA="}, "state"),
        (
            "getView",
            lambda g: {"state": g["state"], "seat": 0, "seatToken": with_star(g["seatTokens"][0])},
            "seat_token",
        ),
        (
            "legalMoves",
            lambda g: {"state": g["state"], "seat": 0, "seat_token": "A=A="},
            "seat_token",
        ),
    ],
    ids=[
        "bad-chars",
        "star-inside",
        "padding-after-whole-token",
        "short-padding",
        "padding-after-quantum",
        "seat-token-star",
        "padding-inside",
    ],
)
def test_bytes_that_are_not_base64_are_refused_naming_the_field(
    server, json_game, route, body, field
):
    assert refused_field(server, route, body(json_game)) == field


@pytest.mark.parametrize("text", ["!!!", "AA*A", "AAAAA", "AA=", "AAAA=", "A=AA", "AA\nAA", " AA"])
def test_invalid_base64_is_json_invalid_for_the_bytes_field(text):
    field, description = refusal_of(json.dumps({"state": text}).encode(), pb.ScoreRequest)
    assert field == "state" and "base64" in description


def test_invalid_base64_is_named_at_any_depth():
    holder = holder_class()
    body = {"items": [{"itemData": "AA=="}, {"itemData": "A*A="}], "blobs": {"k": "AAAAA"}}
    assert refusal_of(json.dumps(body).encode(), holder)[0] == "items[1].item_data"
    assert refusal_of(b'{"blobs": {"k": "AAAAA"}}', holder)[0] == 'blobs["k"]'
    good = {
        "items": [{"itemName": "a"}],
        "byName": {"k": {"item_data": "-_8"}},
        "blobs": {"k": "+/8="},
    }
    parsed: Any = parse_request(json.dumps(good).encode(), holder)
    assert parsed.by_name["k"].item_data == parsed.blobs["k"] == b"\xfb\xff"


@pytest.mark.parametrize(
    "text", ["+/+/", "-_-_", "+/8=", "-_8=", "-_8", "+/8", "AA==", "AA", "AAA=", "AAA", ""]
)
def test_standard_and_url_safe_base64_with_or_without_padding_are_accepted(text):
    expected = base64.urlsafe_b64decode(
        text.replace("+", "-").replace("/", "_") + "=" * (-len(text.rstrip("=")) % 4)
    )
    assert parse_request(json.dumps({"state": text}).encode(), pb.ScoreRequest).state == expected


def test_a_real_token_works_in_every_base64_spelling(server, json_game):
    token = json_game["state"]
    for spelling in (
        token,
        token.rstrip("="),
        token.replace("+", "-").replace("/", "_"),
        token.replace("+", "-").replace("/", "_").rstrip("="),
    ):
        value = rpc(server, "score", {"state": spelling})
        assert value["totals"] == [0, 0], value


# -- refusals in words ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field", "names"),
    [
        (
            b'{"config": {"rules": {"removal": "SPADES"}}}',
            "config.rules.removal",
            "REMOVAL_COURTS, REMOVAL_SPADES, REMOVAL_NONE",
        ),
        (
            b'{"move": {"card": {"rank": "RANK_TEN", "suit": "hearts"}}}',
            "move.card.suit",
            "SUIT_SPADES, SUIT_HEARTS, SUIT_DIAMONDS, SUIT_CLUBS",
        ),
        # The longest list of names, on a long path: the refused value still shows.
        (
            b'{"decks": [{"cards": [{"suit": "SUIT_SPADES", "rank": "RANK_SEVENN"}]}]}',
            "decks[0].cards[0].rank",
            "RANK_ACE, RANK_TWO, RANK_THREE, RANK_FOUR, RANK_FIVE, RANK_SIX, "
            "RANK_SEVEN, RANK_EIGHT, RANK_NINE, RANK_TEN, RANK_JACK, RANK_QUEEN, RANK_KING",
        ),
    ],
)
def test_an_unknown_enum_name_is_refused_naming_the_valid_ones(body, field, names):
    request = pb.PlayRequest if b"move" in body else pb.NewGameRequest
    value = body.split(b'"')[-2].decode()
    assert refusal_of(body, request) == (field, f'must be one of {names}, not "{value}"')


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"config": {"players": "0x10"}}', "config.players"),
        (b'{"config": {"players": [2]}}', "config.players"),
        (b'{"config": {"players": 99999999999}}', "config.players"),
        (b'{"config": {"rules": 5}}', "config.rules"),
        (b'{"config": {"teams": "TEAM_MODE_NONE_SUCH"}}', "config.teams"),
        (b'{"config": {"drawForDeal": 1}}', "config.draw_for_deal"),
        (b'{"decks": [5]}', "decks[0]"),
        (b'{"decks": [{"cards": {}}]}', "decks[0].cards"),
    ],
)
def test_a_wrong_value_is_refused_in_words_without_python_internals(body, field):
    named, description = refusal_of(body, pb.NewGameRequest)
    assert named == field
    for python in ("int()", "len()", "object is not", "operand", ".."):
        assert python not in description
    assert not description.endswith(".")


def test_bytes_of_the_wrong_json_type_are_refused_in_words():
    field, description = refusal_of(b'{"state": 5}', pb.ScoreRequest)
    assert field == "state" and "len()" not in description
    assert description == "must be base64 (a JSON string), not a number"


# -- CORS origins as browsers send them -----------------------------------------------------


def test_configured_origins_are_normalised_as_browsers_send_them():
    assert parse_origins(
        "https://Play.Example.com, https://x.example:443, HTTP://Y.example:80,"
        " http://z.example:443, https://[::1]:8443/"
    ) == (
        "https://play.example.com",
        "https://x.example",
        "http://y.example",
        "http://z.example:443",
        "https://[::1]:8443",
    )
    for bad in ("a.example", "ftp://a.example", "https://a.example/path", "https://", "null"):
        with pytest.raises(ValueError, match=NOT_AN_ORIGIN):
            parse_origins(bad)


@pytest.mark.parametrize(
    "bad",
    [
        "https://a.example:abc",
        "https://:80",
        "https://a b",
        "https://a.example?x=1",
        "https://a.example#frag",
        "https://user:pw@a.example",
        "https://a.example:99999",
        "https://a.example:0",
        "https://[zz",
    ],
)
def test_what_no_browser_sends_as_an_origin_is_refused_at_start(bad):
    """Each was taken and could never equal a browser's Origin: CORS stayed closed for the
    origin meant, silently (a CLI review's find)."""
    with pytest.raises(ValueError, match=NOT_AN_ORIGIN):
        parse_origins(bad)


def test_an_origin_beyond_ascii_is_no_origin():
    """Browsers send ASCII; Unicode lowering would take the Kelvin sign for a "k"."""
    kelvin = "https://\u212aards.example"
    assert normal_origin(kelvin) is None
    assert not CorsPolicy(("https://kards.example",)).allows(kelvin)
    with pytest.raises(ValueError, match="xn-- form"):
        parse_origins("https://bücher.example")
    assert parse_origins("https://xn--bcher-kva.example") == ("https://xn--bcher-kva.example",)


def test_a_star_is_every_origin_alone_never_a_pattern():
    """docs/api.md, "CORS": ``*`` allows any origin; ``*.example.com`` is no wildcard of
    subdomains (CORS has none) and is refused at start rather than taken silently."""
    for bad in ("*.example.com", "**", "https://a.example, *a"):
        with pytest.raises(ValueError, match=NOT_AN_ORIGIN):
            parse_origins(bad)


def test_an_origin_with_an_empty_port_has_the_default_port():
    """``https://a.example:`` is ``https://a.example`` (the URL standard's empty port), as
    configured and as sent by a client, which must not make the gateway fail (a 500)."""
    assert parse_origins("https://a.example:, http://b.example:") == (
        "https://a.example",
        "http://b.example",
    )
    policy = CorsPolicy(parse_origins("https://play.example"))
    assert policy.allows("https://play.example:")

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        score = f"{url}/v1/krypkasino:score"
        async with session.post(score, json={}, headers={"Origin": "https://play.example:"}) as r:
            assert r.status == 400
            assert r.headers["Access-Control-Allow-Origin"] == "https://play.example:"

    run(krypkasino_gateway(cors=parse_origins("https://play.example")), scenario)


def test_a_port_of_five_digits_with_leading_zeros_is_that_port():
    assert normal_origin("https://a.example:00443") == "https://a.example"
    assert normal_origin("https://a.example:08080") == "https://a.example:8080"


def test_origins_match_whatever_their_case_and_default_port():
    policy = CorsPolicy(("https://Play.Example:443",))
    assert policy.allows("https://play.example")
    assert policy.allows("HTTPS://PLAY.EXAMPLE")
    assert not policy.allows("https://play.example:8443")
    assert not policy.allows("null") and not policy.allows(None)
    headers = policy.response_headers("https://play.example")
    assert headers["Access-Control-Allow-Origin"] == "https://play.example"


def test_a_browser_origin_matches_a_configured_origin_in_capitals_with_its_port():
    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        score = f"{url}/v1/krypkasino:score"
        origin = "https://play.example"
        async with session.options(score, headers=preflight_headers(origin)) as r:
            assert r.status == 204
            assert r.headers["Access-Control-Allow-Origin"] == origin
        async with session.post(score, json={}, headers={"Origin": origin}) as r:
            assert r.status == 400
            assert r.headers["Access-Control-Allow-Origin"] == origin
        async with session.post(score, json={}, headers={"Origin": "https://evil.example"}) as r:
            assert "Access-Control-Allow-Origin" not in r.headers

    run(krypkasino_gateway(cors=parse_origins("https://Play.Example:443")), scenario)


@pytest.mark.parametrize("port", ["²", "٣", "٤٤٣", "1" * 5000, "123456"])
def test_an_origin_with_a_port_that_is_no_port_is_no_allowed_origin(port):
    """Any client can send one: ``str.isdigit`` took "²" and int() then failed, a 500."""
    policy = CorsPolicy(("https://play.example",))
    assert not policy.allows(f"https://play.example:{port}")

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        score = f"{url}/v1/krypkasino:score"
        async with session.post(
            score, json={}, headers={"Origin": f"https://play.example:{port}"}
        ) as r:
            assert r.status == 400 and "Access-Control-Allow-Origin" not in r.headers
        headers = preflight_headers(f"https://play.example:{port}")
        async with session.options(score, headers=headers) as r:
            assert r.status == 204 and "Access-Control-Allow-Origin" not in r.headers

    run(krypkasino_gateway(cors=parse_origins("https://play.example")), scenario)


@pytest.mark.parametrize(
    ("body", "field", "description"),
    [
        (
            b'{"config": {"teams": true}}',
            "config.teams",
            "an enum value name (a JSON string) or number, not true",
        ),
        (
            b'{"config": {"teams": [1]}}',
            "config.teams",
            "an enum value name (a JSON string) or number, not an array",
        ),
        (b'{"decks": 5}', "decks", "a JSON array, not a number"),
        (b'{"seed": true}', "seed", "an integer (a JSON number or string), not true"),
        (b'{"seed": false}', "seed", "an integer (a JSON number or string), not false"),
    ],
)
def test_a_value_of_the_wrong_json_type_is_named_with_the_type_it_needs(
    body: bytes, field: str, description: str
) -> None:
    assert refusal_of(body, pb.NewGameRequest) == (field, f"must be {description}")


def test_a_name_given_twice_is_named_wherever_it_comes() -> None:
    body = b'{"seed": "1", "seed": "2", "config": {"players": 2}}'
    assert refusal_of(body, pb.NewGameRequest) == ("seed", "appears twice")


def test_json_booleans_set_the_rule_flags() -> None:
    body = b'{"config": {"players": 2, "rules": {"fourFour": true, "single_deck": false}}}'
    rules = parse_request(body, pb.NewGameRequest).config.rules
    assert (rules.four_four, rules.single_deck) == (True, False)


def test_enum_numbers_may_come_as_json_strings() -> None:
    """proto3 JSON takes an enum's number in a string, as json_format does (docs/api.md)."""
    body = b'{"config": {"players": 4, "teams": "2", "rules": {"removal": "3"}}}'
    config = parse_request(body, pb.NewGameRequest).config
    assert (config.teams, config.rules.removal) == (pb.TEAM_MODE_PAIRS, pb.REMOVAL_NONE)


# -- what the walk leaves alone and what it words itself ------------------------------------


def scalars_class() -> type[Message]:
    """A request with what no krypkasino request has: a repeated scalar, a double,
    a ``google.protobuf.Value`` (whose JSON may be any JSON value), a oneof, and a
    list of its own kind."""
    file = strict_proto_file("strict_scalars")
    one, many = FieldDescriptor.LABEL_OPTIONAL, FieldDescriptor.LABEL_REPEATED
    scalars = file.message_type.add(name="Scalars")
    scalars.field.add(name="counts", number=1, type=FieldDescriptor.TYPE_INT32, label=many)
    scalars.field.add(name="ratio", number=2, type=FieldDescriptor.TYPE_DOUBLE, label=one)
    scalars.field.add(
        name="extra",
        number=3,
        type=FieldDescriptor.TYPE_MESSAGE,
        label=one,
        type_name=".google.protobuf.Value",
    )
    scalars.field.add(
        name="children",
        number=6,
        type=FieldDescriptor.TYPE_MESSAGE,
        label=many,
        type_name=".test.strict.v1.Scalars",
    )
    scalars.oneof_decl.add(name="choice")
    for number, name in ((4, "left"), (5, "right")):
        scalars.field.add(
            name=name, number=number, type=FieldDescriptor.TYPE_INT32, label=one, oneof_index=0
        )
    return strict_message_class(file, "Scalars")


def test_a_body_of_only_white_space_is_the_empty_request() -> None:
    """Like an empty body (docs/api.md), not malformed JSON."""
    assert parse_request(b" \r\n\t ", pb.NewGameRequest) == pb.NewGameRequest()


@pytest.mark.parametrize("body", [b"\x0b", b" \x0c ", b"\x1c"])
def test_white_space_that_json_does_not_allow_is_malformed_not_empty(body: bytes) -> None:
    """RFC 8259 allows only space, tab, LF and CR between values; ``bytes.strip()`` took a
    vertical tab or form feed for white space, and the body for the empty request."""
    with pytest.raises(ServiceError) as refused:
        parse_request(body, pb.NewGameRequest)
    assert refused.value.reason == "JSON_INVALID"


@pytest.mark.parametrize(
    "body", [b'{"\\ud800": 1}', b'{"config": {"teams": "\\udc00"}}', b'{"bogus": ["a\\uDBFF"]}']
)
def test_an_unpaired_surrogate_escape_is_refused_for_the_whole_body(body: bytes) -> None:
    """json_format fails on these with SystemError, which would be a 500."""
    assert refusal_of(body, pb.NewGameRequest) == (
        "",
        "a string holds an unpaired UTF-16 surrogate escape",
    )


def test_null_is_the_default_of_any_field_even_a_repeated_one_or_a_map() -> None:
    body = b'{"decks": null, "config": null, "seed": null}'
    assert parse_request(body, pb.NewGameRequest) == pb.NewGameRequest()
    holder = holder_class()
    assert parse_request(b'{"byName": null, "items": null}', holder) == holder()


def test_a_null_element_of_a_list_is_left_to_json_format() -> None:
    """Which refuses it in its own words, after the element's path in the message; the
    field violation names the path once, as its field."""
    with pytest.raises(ServiceError) as refused:
        parse_request(b'{"decks": [{"cards": [null]}]}', pb.NewGameRequest)
    refusal = refused.value
    why = "null is not allowed to be used as an element in a repeated field"
    assert refusal.message == f"decks[0].cards[0]: {why}"
    assert [(v.field, v.description) for v in refusal.violations] == [("decks[0].cards[0]", why)]


@pytest.mark.parametrize(("text", "seed"), [("1.0", 1), ("3e0", 3), ('"0"', 0), ('"10"', 10)])
def test_an_integer_may_come_as_any_json_number_or_a_string_of_digits(text: str, seed: int) -> None:
    """proto3 JSON takes an integral JSON number in exponent or fraction form; a string
    holds the one spelling the OpenAPI document's pattern allows."""
    assert parse_request(f'{{"seed": {text}}}'.encode(), pb.NewGameRequest).seed == seed


def test_an_enum_number_may_come_as_an_integral_json_float() -> None:
    body = b'{"config": {"players": 4, "teams": 2.0}}'
    assert parse_request(body, pb.NewGameRequest).config.teams == pb.TEAM_MODE_PAIRS


def test_an_enum_name_that_looks_like_a_number_in_exponent_form_is_an_unknown_name() -> None:
    """Only digits in a string are an enum number; "1e0" is a name, and none of the enum's."""
    assert refusal_of(b'{"config": {"teams": "1e0"}}', pb.NewGameRequest) == (
        "config.teams",
        'must be one of TEAM_MODE_INDIVIDUAL, TEAM_MODE_PAIRS, TEAM_MODE_TRIOS, not "1e0"',
    )


@pytest.mark.parametrize(
    ("body", "of_holder", "path", "words"),
    [
        (
            b'{"config": {"rules": {"fourFour": 1}}}',
            False,
            "config.rules.four_four",
            "must be true or false, not a number",
        ),
        (b'{"byName": [{}]}', True, "by_name", "must be a JSON object, not an array"),
        (
            b'{"items": [{}, {"itemName": 5}]}',
            True,
            "items[1].item_name",
            "must be a JSON string, not a number",
        ),
    ],
    ids=["number_for_a_bool", "array_for_a_map", "number_for_a_string"],
)
def test_a_value_of_the_wrong_json_type_is_refused_in_words_with_its_path(
    body: bytes, of_holder: bool, path: str, words: str
) -> None:
    request = holder_class() if of_holder else pb.NewGameRequest
    assert refusal_of(body, request) == (path, words)


def test_a_map_key_outside_ascii_is_named_as_sent() -> None:
    body = json.dumps({"blobs": {"clé": "AAAAA"}}, ensure_ascii=False).encode()
    assert refusal_of(body, holder_class())[0] == 'blobs["clé"]'


def test_each_element_of_a_repeated_scalar_counts_one_byte_towards_the_limit() -> None:
    """Against two for each message: three ints fit a limit of 3, four do not."""
    scalars = scalars_class()
    parsed: Any = parse_request(b'{"counts": [1, 2, 3]}', scalars, 3)
    assert list(parsed.counts) == [1, 2, 3]
    with pytest.raises(ServiceError) as refused:
        parse_request(b'{"counts": [1, 2, 3, 4]}', scalars, 3)
    assert (refused.value.reason, refused.value.metadata) == ("REQUEST_TOO_LARGE", {"limit": "3"})


@pytest.mark.parametrize(("text", "ratio"), [("0.5", 0.5), ("2", 2.0), ('"0.25"', 0.25)])
def test_a_double_may_come_as_a_json_number_or_string(text: str, ratio: float) -> None:
    parsed: Any = parse_request(f'{{"ratio": {text}}}'.encode(), scalars_class())
    assert parsed.ratio == ratio


def test_a_double_given_as_infinity_in_a_string_is_taken() -> None:
    """proto3 JSON spells the special values as strings: "NaN", "Infinity", "-Infinity"."""
    parsed: Any = parse_request(b'{"ratio": "-Infinity"}', scalars_class())
    assert parsed.ratio == float("-inf")


@pytest.mark.parametrize(
    ("text", "kind"), [("true", "true"), ("[1]", "an array"), ("{}", "an object")]
)
def test_a_double_of_the_wrong_json_type_is_refused_in_words(text: str, kind: str) -> None:
    assert refusal_of(f'{{"ratio": {text}}}'.encode(), scalars_class()) == (
        "ratio",
        f"must be a number (a JSON number or string), not {kind}",
    )


@pytest.mark.parametrize("text", ["5", '"a"', "[1, {}]", "true"])
def test_a_well_known_type_takes_its_own_json_even_when_it_is_no_object(text: str) -> None:
    """A ``google.protobuf.Value`` may be any JSON value: the walk leaves it to json_format."""
    parsed: Any = parse_request(f'{{"extra": {text}}}'.encode(), scalars_class())
    assert json_format.MessageToDict(parsed)["extra"] == json.loads(text)


def test_two_fields_of_one_oneof_are_refused_for_the_whole_body() -> None:
    """Each parses alone, so no field is narrower than the body: the violation has none."""
    assert refusal_of(b'{"left": 1, "right": 2}', scalars_class()) == (
        "",
        'Message type "test.strict.v1.Scalars" should not have multiple "choice" oneof fields',
    )


def test_an_element_refused_whole_is_named_when_none_of_its_fields_is() -> None:
    body = b'{"children": [{"left": 1}, {"left": 1, "right": 2}]}'
    assert refusal_of(body, scalars_class())[0] == "children[1]"


def test_an_unknown_name_after_a_valid_list_is_named_not_the_list() -> None:
    body = b'{"move": {"captures": [{"rank": "RANK_TWO", "suit": "SUIT_CLUBS"}], "bogus": 1}}'
    assert refusal_of(body, pb.PlayRequest)[0] == "move.bogus"


def test_a_value_json_format_refuses_after_a_valid_list_is_named_not_the_list() -> None:
    body = json.dumps({"children": [{"children": [{"counts": [1]}], "ratio": "abc"}]})
    assert refusal_of(body.encode(), scalars_class())[0] == "children[0].ratio"


def test_the_largest_value_of_each_integer_field_is_taken() -> None:
    body = b'{"seed": "18446744073709551615", "config": {"firstDealer": 2147483647}}'
    parsed = parse_request(body, pb.NewGameRequest)
    assert (parsed.seed, parsed.config.first_dealer) == (2**64 - 1, 2**31 - 1)


def test_a_seed_of_twenty_digits_as_a_bare_json_number_is_taken_exactly(server) -> None:
    """2**64 - 1 has 20 digits, as many as any 64-bit integer: a bare JSON number of 20
    digits is that integer, not out of range and not a float rounded to 53 bits. The game
    is the one its seed in a string starts; one past 2**64 - 1 is refused."""

    def deal(seed: int | str) -> dict[str, Any]:
        answer = rpc(server, "newGame", {"config": {"players": 2}, "seed": seed})
        return {k: v for k, v in answer["view"].items() if k not in ("gameId", "stateId")}

    for seed in (2**64 - 1, 10**19):
        assert len(json.dumps(seed)) == 20
        assert deal(seed) == deal(str(seed)), seed
    assert refused_field(server, "newGame", {"config": {"players": 2}, "seed": 2**64}) == "seed"


@pytest.mark.parametrize("number", ["1e20", "-1e20"])
def test_an_enum_given_a_number_past_64_bits_is_told_the_width_of_an_enum_number(
    number: str,
) -> None:
    body = f'{{"move": {{"card": {{"rank": {number}}}}}}}'.encode()
    assert refusal_of(body, pb.PlayRequest) == (
        "move.card.rank",
        f"must be {ENUM_NUMBER_WORDS}, not {number}",
    )


def test_a_value_json_format_refuses_is_named_by_its_proto_name() -> None:
    """Not by the lowerCamelCase name it was sent under."""
    assert refusal_of(b'{"config": {"firstDealer": 99999999999}}', pb.NewGameRequest) == (
        "config.first_dealer",
        "must be -2147483648 to 2147483647, not 99999999999",
    )


def test_an_unknown_name_is_refused_in_the_first_line_of_json_formats_words() -> None:
    """Without the nesting, the trailing ' at "NewGameRequest.config"' and the list of
    available fields that follows on the next line."""
    assert refusal_of(b'{"config": {"bogus": 1}}', pb.NewGameRequest) == (
        "config.bogus",
        "config has no such field",
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("AA*A", '"*" at offset 2 is not a base64 character'),
        ("-_\nA", '"\\n" at offset 2 is not a base64 character'),
        ("AA=", "3 characters cannot be base64 (a character is missing or extra)"),
        ("AA======", '"=" may only pad the end'),
        ("AAAA====", '"=" may only pad the end'),
        ("-_=A", '"=" may only pad the end'),
    ],
)
def test_a_refusal_of_bytes_says_what_is_wrong_with_the_base64(text: str, problem: str) -> None:
    body = json.dumps({"state": text}).encode()
    assert refusal_of(body, pb.ScoreRequest) == ("state", f"not base64: {problem}")


@pytest.mark.parametrize(
    ("value", "quoted"), [("x " * 20, "x " * 20), ("x " * 20 + "x", "x " * 20 + "...")]
)
def test_a_refused_value_is_quoted_up_to_forty_characters(value: str, quoted: str) -> None:
    assert refusal_of(f'{{"seed": "{value}"}}'.encode(), pb.NewGameRequest) == (
        "seed",
        f'must be {INTEGER_WORDS}, not "{quoted}"',
    )


def test_a_field_under_both_names_is_refused_saying_both_names_in_order() -> None:
    body = b'{"config": {"first_dealer": 1, "firstDealer": 0}}'
    assert refusal_of(body, pb.NewGameRequest) == (
        "config.first_dealer",
        "appears twice, as first_dealer and firstDealer",
    )


def test_of_names_given_twice_where_no_field_is_known_the_first_is_named() -> None:
    body = b'{"meta": {"x": {"a": 1, "a": 2}, "y": {"b": 1, "b": 2}}}'
    assert refusal_of(body, holder_class()) == ("", 'the name "a" appears twice')


def test_a_long_duplicated_name_is_quoted_short() -> None:
    body = f'{{"meta": {{"{LONG}": 1, "{LONG}": 2}}}}'.encode()
    field, description = refusal_of(body, holder_class())
    assert field == "" and description.startswith('the name "x x') and len(description) <= 403


INTEGER_WORDS = "an integer (a JSON number, or a string of decimal digits without a leading zero)"


@pytest.mark.parametrize(
    "text", ["07", "00", "-0", "-01", "+1", "1e3", "7.0", "1.", ".5", "1e", " 1", "1 "]
)
def test_an_integer_in_a_string_must_be_decimal_digits_without_a_leading_zero(text: str) -> None:
    """json_format would take "07", "+1" (Python's int()) and "1e3", "7.0" (as JSON numbers);
    the OpenAPI pattern allows one spelling of each value, and so does the gateway."""
    body = json.dumps({"seed": text}).encode()
    assert refusal_of(body, pb.NewGameRequest) == (
        "seed",
        f"must be {INTEGER_WORDS}, not {json.dumps(text)}",
    )


def test_a_config_integer_in_a_string_is_held_to_the_same_spelling() -> None:
    """32-bit integers are JSON numbers in the document, but a string of one is taken
    as proto3 JSON allows, in the same one spelling as a 64-bit one."""
    assert parse_request(b'{"config": {"players": "4"}}', pb.NewGameRequest).config.players == 4
    assert refusal_of(b'{"config": {"players": "4.0"}}', pb.NewGameRequest) == (
        "config.players",
        f'must be {INTEGER_WORDS}, not "4.0"',
    )


@pytest.mark.parametrize("text", ["02", "0002", "-0", "-00", "-01"])
def test_an_enum_number_in_a_string_is_held_to_the_same_spelling(text: str) -> None:
    """json_format would read "02" as 2 and "-0" as 0, where "2" and "0" are the spellings."""
    body = json.dumps({"config": {"players": 4, "teams": text}}).encode()
    assert refusal_of(body, pb.NewGameRequest) == (
        "config.teams",
        "must be an enum value name or number (a JSON number, or a string of "
        f"decimal digits without a leading zero), not {json.dumps(text)}",
    )
    card = json.dumps({"move": {"card": {"rank": text, "suit": "1"}}}).encode()
    assert refusal_of(card, pb.PlayRequest)[0] == "move.card.rank"


@pytest.mark.parametrize("digits", [21, 4300, 4301, 100_000])
@pytest.mark.parametrize("quoted", [False, True], ids=["number", "string"])
def test_an_integer_longer_than_any_64_bit_one_is_out_of_range_naming_its_field(
    digits: int, quoted: bool
) -> None:
    """Python's int() reads at most 4,300 digits: json.loads and json_format once refused
    longer ones in Python's words ("use sys.set_int_max_str_digits()"), naming no field."""
    text = "9" * digits
    value = json.dumps(text) if quoted else text
    body = f'{{"config": {{"players": 2}}, "seed": {value}}}'.encode()
    field, description = refusal_of(body, pb.NewGameRequest)
    assert field == "seed"
    shown = text if digits <= 40 else f"{text[:40]}..."
    assert description == f"must be 0 to 18446744073709551615, not {shown}"
    assert len(description) <= 403


def test_negative_numbers_in_strings_are_integers_and_enum_numbers() -> None:
    """Left to json_format, which takes them: proto3 enums are open."""
    body = b'{"config": {"firstDealer": "-1", "teams": "-1"}}'
    config = parse_request(body, pb.NewGameRequest).config
    assert (config.first_dealer, config.teams) == (-1, -1)


def test_a_response_is_compact_json_with_every_field_without_presence() -> None:
    assert message_json(pb.ScoreResponse()) == (
        b'{"deals":[],"totals":[],"gameOver":false,"winners":[],"tiebreakTeams":[],"teamOfSeat":[]}'
    )


@pytest.mark.parametrize(
    ("body", "message_class", "path", "sent"),
    [
        (b'{"config": {"teams": 4294967298}}', pb.NewGameRequest, "config.teams", "4294967298"),
        (b'{"config": {"teams": "4294967298"}}', pb.NewGameRequest, "config.teams", "4294967298"),
        (
            b'{"config": {"tieRule": -2147483649}}',
            pb.NewGameRequest,
            "config.tie_rule",
            "-2147483649",
        ),
        (
            b'{"config": {"teams": 1099511627776.0}}',
            pb.NewGameRequest,
            "config.teams",
            "1099511627776",  # the number read, not its spelling
        ),
        (
            b'{"move": {"card": {"rank": 4294967301}}}',
            pb.PlayRequest,
            "move.card.rank",
            "4294967301",
        ),
        (b'{"config": {"teams": 2147483648}}', pb.NewGameRequest, "config.teams", "2147483648"),
        (b'{"config": {"teams": -2147483649}}', pb.NewGameRequest, "config.teams", "-2147483649"),
        (b'{"config": {"teams": "-2147483649"}}', pb.NewGameRequest, "config.teams", "-2147483649"),
        (b'{"config": {"teams": 1e30}}', pb.NewGameRequest, "config.teams", "1e30"),
    ],
)
def test_an_enum_number_beyond_32_bits_is_refused_not_wrapped(
    body: bytes, message_class: type[Message], path: str, sent: str
) -> None:
    """json_format read 4294967298 as 2 (TEAM_MODE_PAIRS) and a rank of 4294967301 as
    RANK_FIVE: a client's bug made another game than it asked for, with no error. The
    refusal names the width an enum number has, not the numbers this release knows: a
    number beyond it is no enum value at all (docs/api.md, "HTTP/JSON")."""
    assert refusal_of(body, message_class) == (path, f"must be {ENUM_NUMBER_WORDS}, not {sent}")


@pytest.mark.parametrize(
    ("teams", "reason", "message"),
    [
        (2147483648, "JSON_INVALID", f"must be {ENUM_NUMBER_WORDS}, not 2147483648"),
        (-2147483649, "JSON_INVALID", f"must be {ENUM_NUMBER_WORDS}, not -2147483649"),
        (2147483647, "FIELD_INVALID", "unknown TeamMode value 2147483647"),
    ],
)
def test_a_server_names_the_width_of_an_enum_number_only_past_32_bits(
    server: ServerProcess, teams: int, reason: str, message: str
) -> None:
    """A number of 32 bits is an enum value this release may not know (FIELD_INVALID,
    naming the ones it knows); one past 32 bits is none at all, which the refusal said
    as "must be 0 to 3" (docs/api.md, "HTTP/JSON")."""
    body = {"config": {"players": 2, "teams": teams}}
    status, _, value = exchange(
        f"{server.http_url}/v1/krypkasino:newGame", json.dumps(body).encode()
    )
    assert (status, refusal(value)[1]) == (400, reason), value
    assert value["message"].startswith(f"config.teams: {message}"), value


def test_enum_numbers_of_32_bits_still_parse() -> None:
    """As numbers and as strings of digits (docs/api.md, "HTTP/JSON"), ten digits too."""
    for number in (2, -(2**31), 2**31 - 1, 10**9):
        for written in (str(number), f'"{number}"'):
            body = f'{{"config": {{"teams": {written}}}}}'.encode()
            assert parse_request(body, pb.NewGameRequest).config.teams == number


def test_an_unknown_name_is_kept_in_the_path_up_to_400_characters() -> None:
    """The path names it as sent, cut at 400 characters (docs/api.md, "Errors",
    ``JSON_INVALID``); an enum's refusal lists every name, Rank's thirteen too."""
    field, _ = refusal_of(b'{"' + b"a" * 450 + b'": 1}', pb.NewGameRequest)
    assert field == "a" * 400 + "..."
    field, why = refusal_of(b'{"move": {"card": {"rank": "RANK_QUEEEN"}}}', pb.PlayRequest)
    names = ", ".join(cards_pb2.Rank.keys()[1:])
    assert (field, why) == ("move.card.rank", f'must be one of {names}, not "RANK_QUEEEN"')


# -- what one body may cost ---------------------------------------------------------------


def test_a_card_with_its_rank_and_suit_counts_six_bytes_towards_the_limit() -> None:
    """Two for the message and two for each field given: a long list of cards is
    refused before json_format parses it, not at a third of what it is."""
    for card in ('{"rank": "RANK_TWO", "suit": "SUIT_CLUBS"}', '{"rank": "2", "suit": 1}'):
        body = f'{{"move": {{"captures": [{card}]}}}}'.encode()
        assert parse_request(body, pb.PlayRequest, 8).ByteSize() == 8
        with pytest.raises(ServiceError) as refused:
            parse_request(body, pb.PlayRequest, 7)
        assert (refused.value.reason, refused.value.metadata) == (
            "REQUEST_TOO_LARGE",
            {"limit": "7"},
        )


@pytest.mark.parametrize(
    "body",
    [
        {"seed": 1},
        {"seed": 2**31 - 1},
        {"seed": "7"},
        {"config": {"players": 2, "rules": {"singleDeck": True}}},
        {"decks": [{"cards": [{"suit": "SUIT_CLUBS"}, {"rank": 1}, {"rank": "2", "suit": "1"}]}]},
        {"seed": "3", "config": {"players": "2", "teams": "1"}},
        {"state": "AA=="},
    ],
    ids=["int", "int32_max", "string_number", "bool", "enums", "numbers_in_strings", "bytes"],
)
def test_the_floor_never_passes_the_real_size(body: dict[str, object]) -> None:
    """Of a body that gives no value at its default (those count as set)."""
    request = pb.PlayRequest if "state" in body else pb.NewGameRequest
    size = parse_request(json.dumps(body).encode(), request).ByteSize()
    assert parse_request(json.dumps(body).encode(), request, size).ByteSize() == size


@pytest.mark.parametrize("digits", ["1" * 5000, "-" + "1" * 5000, "-" + "0" * 5000 + "1"])
def test_an_enum_number_of_thousands_of_digits_is_refused_not_a_crash(digits: str) -> None:
    """Python reads no more than 4,300 digits into an int."""
    body = json.dumps({"config": {"players": 2, "teams": digits}}).encode()
    field, description = refusal_of(body, pb.NewGameRequest)
    assert field == "config.teams"
    if digits.endswith("01"):  # -1: 32 bits, so json_format's to judge
        assert "2147483647" not in description
    else:
        assert description.startswith(f"must be {ENUM_NUMBER_WORDS}, not ")


def test_a_lone_surrogate_at_any_depth_json_reads_is_refused_not_a_crash() -> None:
    """The check for unpaired surrogates once recursed, and overflowed just where
    json.loads, a little leaner, had not: a 500 for a narrow band of depths."""
    for depth in range(1, sys.getrecursionlimit() + 50):
        body = b'{"x":' + b"[" * depth + b'"\\ud800"' + b"]" * depth + b"}"
        try:
            parse_request(body, pb.NewGameRequest)
        except ServiceError as error:
            assert error.reason == "JSON_INVALID", depth
        else:
            raise AssertionError(f"taken at depth {depth}")


@pytest.mark.parametrize(
    "text",
    [
        "12345678901234567.0",
        "12345678901234567e0",
        "1.2345678901234567e16",
        "123456789012345670e-1",
    ],
)
def test_a_whole_number_in_fraction_or_exponent_form_is_read_exactly(text: str) -> None:
    """A float would round it past 2**53, and the seed would deal another game."""
    assert (
        parse_request(f'{{"seed": {text}}}'.encode(), pb.NewGameRequest).seed == 12345678901234567
    )


@pytest.mark.parametrize(
    ("body", "field", "text"),
    [
        (b'{"seed": 1234567890123456789e-1}', "seed", "1234567890123456789e-1"),
        (b'{"seed": 1e-400}', "seed", "1e-400"),
        (b'{"config": {"players": 4.5}}', "config.players", "4.5"),
        (
            b'{"config": {"players": 4.000000000000000001}}',
            "config.players",
            "4.000000000000000001",
        ),
        (b'{"config": {"teams": 2.5}}', "config.teams", "2.5"),
        (b'{"config": {"teams": 1e-400}}', "config.teams", "1e-400"),
    ],
)
def test_a_number_that_is_no_whole_number_is_refused_for_an_integer_or_enum(
    body: bytes, field: str, text: str
) -> None:
    """Even where a float would round it to one (1e-400 to 0, 4.000000000000000001 to 4)."""
    assert refusal_of(body, pb.NewGameRequest) == (
        field,
        f"must be a whole number, not {text}",
    )


@pytest.mark.parametrize(
    ("text", "description"),
    [
        (
            "18446744073709551616.0",
            "must be 0 to 18446744073709551615, not 18446744073709551616",
        ),  # 2**64
        ("1e20", "must be 0 to 18446744073709551615, not 1e20"),
        ("1e999999999", "must be 0 to 18446744073709551615, not 1e999999999"),
        # Past what Python's decimal reads: refused all the same, not INTERNAL.
        (
            "1e999999999999999999999",
            "must be 0 to 18446744073709551615, not 1e999999999999999999999",
        ),
    ],
)
def test_a_whole_number_beyond_64_bits_is_refused_as_out_of_range(
    text: str, description: str
) -> None:
    assert refusal_of(f'{{"seed": {text}}}'.encode(), pb.NewGameRequest) == ("seed", description)


def test_a_double_takes_a_number_finer_than_a_float_as_the_nearest_float() -> None:
    parsed: Any = parse_request(b'{"ratio": 0.1000000000000000000001}', scalars_class())
    assert parsed.ratio == 0.1


@pytest.mark.parametrize(
    "text",
    ["0e21", "-0.0e25", "0e999999999", "0e99999999999999999999999", "0e-99999999999999999999"],
)
def test_zero_is_zero_whatever_its_exponent(text: str) -> None:
    assert (
        parse_request(
            f'{{"seed": {text}, "config": {{"teams": {text}}}}}'.encode(), pb.NewGameRequest
        ).seed
        == 0
    )


def test_a_tiny_number_past_what_decimal_reads_is_no_whole_number() -> None:
    assert refusal_of(b'{"seed": 1e-99999999999999999999}', pb.NewGameRequest) == (
        "seed",
        "must be a whole number, not 1e-99999999999999999999",
    )


def test_an_integer_too_large_for_a_double_is_refused_naming_the_field() -> None:
    """json_format's float() of it raised OverflowError: INTERNAL, had a request a double."""
    field, description = refusal_of(b'{"ratio": 1' + b"0" * 400 + b"}", scalars_class())
    assert field == "ratio"
    assert "too large" in description


def test_the_gateway_takes_exactly_the_base64_the_openapi_pattern_allows():
    """The document's pattern for bytes (``BASE64_PATTERN``) says what the gateway takes;
    the gateway checks with a cheaper match and the length's arithmetic. Every string of
    up to 7 characters of both alphabets' edges, padding and a stray character."""
    pattern = re.compile(BASE64_PATTERN)
    for length in range(8):
        for letters in itertools.product("A-_/+=*", repeat=length):
            text = "".join(letters)
            taken = _base64_problem(text) is None
            assert taken == (pattern.fullmatch(text) is not None), text
