"""An HTTP/JSON client generated from older protos parses this release's answers only with
its parser's option to ignore unknown fields (docs/api.md, "HTTP/JSON" and "Upgrades").

The docs said older clients ignore added response fields, "JSON readers unknown keys":
untrue for proto3 JSON, whose parsers refuse a key their message lacks by default (a
review: Python's json_format, protobuf-es, Java's JsonFormat; Go's protojson and C#'s
JsonParser say so too). Here real answers of the gateway are parsed with the message
types of each released image (``fixtures/released_protos``), as a client generated from
that release would parse them: with ``ignore_unknown_fields=True`` every one parses into
what the older types hold, and without it the first release's types refuse each added
field the docs name. The docs' list of each language's option is checked too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, json_format
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from tests.service.http_helpers import krypkasino_gateway, run

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api.md"
RELEASED = sorted(
    (Path(__file__).parent / "fixtures" / "released_protos").glob("*.binpb"),
    key=lambda path: int(path.name.split("-", 1)[0]),
)
FIRST = RELEASED[0]
PACKAGE = "cardrules.krypkasino.v1"
RESPONSES = {
    "newGame": "NewGameResponse",
    "legalMoves": "LegalMovesResponse",
    "play": "PlayResponse",
    "score": "ScoreResponse",
    "getView": "GetViewResponse",
}
# Each language's option, as docs/api.md, "Fields a later release adds", writes it.
OPTIONS = (
    "ignore_unknown_fields=True",
    "JsonFormat.parser().ignoringUnknownFields()",
    "protojson.UnmarshalOptions{DiscardUnknown: true}",
    "JsonParser.Settings.Default.WithIgnoreUnknownFields(true)",
    "ignoreUnknownFields: true",
)


def released_types(image: Path) -> dict[str, type[Message]]:
    """The response messages of a released image (a Buf image is a ``FileDescriptorSet``,
    each file after its imports), by RPC route name, from a pool of their own."""
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(image.read_bytes()).file:
        pool.Add(file)
    return {
        route: GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
        for route, name in RESPONSES.items()
    }


@pytest.fixture(scope="module")
def answers() -> dict[str, str]:
    """The body of each call's answer, as the gateway sent it, in a 2-player game (seed 7)
    after one move: the view then has a ``lastMove``, the legal moves list
    ``sweepRanksAfter`` and the score ``teamOfSeat`` and ``tiebreakTeams``."""
    bodies: dict[str, str] = {}

    async def call(session: aiohttp.ClientSession, url: str, route: str, body: Any) -> Any:
        async with session.post(f"{url}/v1/krypkasino:{route}", json=body) as response:
            text = await response.text()
            assert response.status == 200, text
        bodies[route] = text
        return json.loads(text)

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        game = await call(session, url, "newGame", {"config": {"players": 2}, "seed": "7"})
        seat = game["view"]["turn"]
        token = game["seatTokens"][seat]
        mover = {"state": game["state"], "seat": seat, "seatToken": token}
        legal = await call(session, url, "legalMoves", mover)
        played = await call(session, url, "play", {**mover, "move": legal["moves"][0]["move"]})
        state = played["state"]
        # Once more after the move (the answer kept): the next seat's moves.
        after = {"state": state, "seat": 1 - seat, "seatToken": game["seatTokens"][1 - seat]}
        await call(session, url, "legalMoves", after)
        await call(session, url, "score", {"state": state})
        await call(session, url, "getView", {"state": state})

    run(krypkasino_gateway(), scenario)
    assert set(bodies) == set(RESPONSES)
    return bodies


def held_in(parsed: Any, sent: Any, where: str = "") -> None:
    """Everything ``parsed`` (an older message printed back as JSON, its defaults left
    out) holds is in ``sent`` with the same value: nothing was misread, only keys the
    older types lack were dropped."""
    if isinstance(parsed, dict):
        assert isinstance(sent, dict), where
        for key, value in parsed.items():
            assert key in sent, f"{where}.{key}"
            held_in(value, sent[key], f"{where}.{key}")
    elif isinstance(parsed, list):
        assert isinstance(sent, list) and len(parsed) == len(sent), where
        for index, (value, original) in enumerate(zip(parsed, sent, strict=True)):
            held_in(value, original, f"{where}[{index}]")
    else:
        assert parsed == sent, where


@pytest.mark.parametrize("image", RELEASED, ids=lambda path: path.stem)
@pytest.mark.parametrize("route", RESPONSES)
def test_every_answer_parses_into_a_released_images_types_ignoring_unknown_fields(
    answers: dict[str, str], image: Path, route: str
) -> None:
    older = json_format.Parse(
        answers[route], released_types(image)[route](), ignore_unknown_fields=True
    )
    printed = json_format.MessageToDict(older)
    assert printed, route
    held_in(printed, json.loads(answers[route]), route)


@pytest.mark.parametrize(
    ("route", "added"),
    [
        ("score", r"teamOfSeat|tiebreakTeams"),
        ("legalMoves", r"sweepRanksAfter"),
        ("play", r"lastMove"),
        ("getView", r"lastMove"),
    ],
)
def test_without_the_option_the_first_releases_types_refuse_an_added_field(
    answers: dict[str, str], route: str, added: str
) -> None:
    """What the docs warn of: a proto3 JSON parser refuses a key its message lacks."""
    with pytest.raises(json_format.ParseError, match=rf'has no field named "({added})"'):
        json_format.Parse(answers[route], released_types(FIRST)[route]())


def section(text: str, title: str) -> str:
    """The bullet of docs/api.md that starts with the bold lead-in ``title``."""
    lead_in = f"- **{title}**"
    assert lead_in in text, f"docs/api.md has no bullet {lead_in}"
    start = text.index(lead_in)
    end = re.compile(r"^- \*\*", re.MULTILINE).search(text, start + 1)
    assert end is not None
    return text[start : end.start()]


def test_the_docs_name_each_languages_option_and_the_error_without_it() -> None:
    text = API.read_text(encoding="utf-8")
    bullet = " ".join(section(text, "Fields a later release adds").split())
    missing = [option for option in OPTIONS if option not in bullet]
    assert not missing, missing
    assert 'has no field named "teamOfSeat"' in bullet
    upgrades = text.split("\n## Upgrades\n", 1)[1].split("\n## ", 1)[0]
    assert "older clients ignore" not in " ".join(upgrades.split()).lower()
    for added in ("Added response fields.", "Added to `LegalMove`: `sweepRanksAfter`"):
        assert "ignores unknown fields" in " ".join(section(upgrades, added).split()), added
