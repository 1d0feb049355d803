"""The proto comments tell a client what a team generating from the protos alone needs.

A review wrote a Node.js client from proto/ only: these hold the comments to the error
model of docs/api.md, "Errors", to one meaning of the per-RPC deadline, to how 64-bit
fields travel in JavaScript, and to the sign of points (K13.3: the lowest total wins).
A proto of its own holds how comments are read in layouts the protos do not use yet:
trailing comments, runs of blank lines, an uncommented field, nested types.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cardrules.client import DEFAULT_TIMEOUT
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FieldDescriptor
from grpc_tools import protoc

from scripts.generate_openapi import descriptor_set
from scripts.generate_protos import THIRD_PARTY
from service.errors import DOMAIN
from service.openapi import SERVICES, reachable
from service.proto_comments import comments
from service.reasons import REFUSAL_REASONS

ROOT = Path(__file__).resolve().parents[2]
API_MD = ROOT / "docs" / "api.md"
PACKAGE = "cardrules.krypkasino.v1"
SERVICE = f"{PACKAGE}.KrypkasinoService"
SIXTY_FOUR_BITS = {
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED64,
}


@pytest.fixture(scope="module")
def notes() -> dict[str, str]:
    """Leading comments by full name, as the OpenAPI descriptions take them."""
    return comments(descriptor_set())


def flat(text: str) -> str:
    return " ".join(text.split())


def errors_table_codes() -> list[str]:
    """The codes of the first table of docs/api.md, "Errors" (the service's refusals)."""
    section = API_MD.read_text().split("\n## Errors\n", 1)[1]
    table = section.split("Over HTTP a few refusals come from the gateway itself", 1)[0]
    codes = re.findall(r"^\| `([A-Z_]+)`", table, re.MULTILINE)
    assert codes, "no codes found in docs/api.md, Errors"
    return codes


def test_the_service_comment_describes_the_error_model(notes: dict[str, str]) -> None:
    """Where a refusal's google.rpc.Status travels, its one ErrorInfo and its domain, the
    BadRequest, the request id trailer, and every code of docs/api.md's table."""
    service = notes[SERVICE]
    for needed in (
        "google.rpc.Status",
        "`grpc-status-details-bin` trailer",
        "exactly one google.rpc.ErrorInfo",
        f"domain `{DOMAIN}`",
        "`reason`",
        "`rule`",
        "google.rpc.BadRequest",
        "`x-request-id` trailer",
        'docs/api.md, "Errors"',
        "clients must ignore details they do not know",
        # A JSON parser fails on a detail whose type it lacks: only types every
        # googleapis library holds (docs/api.md, "Errors").
        "only ones of google/rpc/error_details.proto",
    ):
        assert needed in service, needed
    errors = flat(API_MD.read_text()).split(" ## Errors ", 1)[1]
    assert "clients must ignore details they do not know" in errors
    missing = [code for code in errors_table_codes() if code not in service]
    assert not missing, f"the service comment does not name {missing}"
    named = re.search(r"google\.rpc protos are in (\S+?)\.?$", service)
    assert named is not None
    folder = ROOT / named.group(1)
    assert folder == THIRD_PARTY / "google" / "rpc"
    assert {"status.proto", "error_details.proto"} <= {p.name for p in folder.iterdir()}


def test_the_expected_deadline_has_one_meaning_everywhere(notes: dict[str, str]) -> None:
    """Each RPC names the same figure, which the service comment and docs/api.md define as
    the least deadline to set, beside the Python client's default (room for retries)."""
    (service,) = SERVICES
    figures = {
        method.name: re.findall(r"Expected deadline: (\d+) s", notes[method.full_name])
        for method in service.methods
    }
    assert all(len(found) == 1 for found in figures.values()), figures
    ((seconds,),) = {tuple(found) for found in figures.values()}
    assert f"the expected deadline each RPC names ({seconds} s) is the least" in notes[SERVICE]
    assert f"Python client's default of {DEFAULT_TIMEOUT:g} s" in notes[SERVICE]
    api = flat(API_MD.read_text())
    assert f"expected deadline of {seconds} s, the least deadline a caller should set" in api
    assert f"the Python client defaults to {DEFAULT_TIMEOUT:g} s" in api


def test_every_64_bit_field_a_client_sees_says_how_javascript_holds_it(
    notes: dict[str, str],
) -> None:
    """A JavaScript number is exact only to 2^53, and @grpc/proto-loader's default Long
    compares wrongly with < and >: every such field of the requests and responses says so."""
    (service,) = SERVICES
    ends = [m.input_type for m in service.methods] + [m.output_type for m in service.methods]
    fields = [
        field
        for message in reachable(ends).values()
        for field in message.fields
        if field.type in SIXTY_FOUR_BITS
    ]
    assert {f.full_name for f in fields} >= {
        f"{PACKAGE}.View.move_number",
        f"{PACKAGE}.NewGameRequest.seed",
    }
    for field in fields:
        note = notes.get(field.full_name, "")
        for needed in ("64-bit integer", "string", "Long", "2^53"):
            assert needed in note, f"{field.full_name} does not say {needed!r}"
    api = flat(API_MD.read_text())
    exact = "holds integers exactly only up to 2^53"
    assert exact in api
    assert exact in notes[f"{PACKAGE}.NewGameRequest.seed"]


def test_play_s_move_is_the_move_of_a_legal_moves_entry(notes: dict[str, str]) -> None:
    """protobufjs drops the keys a Move lacks, so a whole LegalMove arrives as a Move
    without its card: the comment names the field to send instead."""
    note = notes[f"{PACKAGE}.PlayRequest.move"]
    assert "the `move` of an entry of LegalMovesResponse.moves" in note
    assert "not the entry (a LegalMove) itself" in note
    entry = pb.LegalMovesResponse.DESCRIPTOR.fields_by_name["moves"].message_type
    assert entry is pb.LegalMove.DESCRIPTOR
    move = pb.PlayRequest.DESCRIPTOR.fields_by_name["move"].message_type
    assert entry.fields_by_name["move"].message_type is move


SIGNED_POINTS = re.compile(r"(?<![\w.])[+-]\d+\b")
# What a comment with a signed figure must say for a reader to know which way it counts.
DIRECTION_WORDS = ("penalty", "reward", "lowest total wins")


def test_every_signed_point_figure_says_which_way_it_counts(notes: dict[str, str]) -> None:
    """K13.3: the lowest total wins, so a +5 for a sweep is a penalty, not a bonus."""
    signed = {
        name: note
        for name, note in notes.items()
        if name.startswith("cardrules.") and SIGNED_POINTS.search(note)
    }
    assert f"{PACKAGE}.MoveKind.MOVE_KIND_SWEEP" in signed
    assert f"{PACKAGE}.SeatScore.sweeps_made" in signed
    unexplained = [
        name for name, note in signed.items() if not re.search("|".join(DIRECTION_WORDS), note)
    ]
    words = ", ".join(repr(word) for word in DIRECTION_WORDS)
    assert not unexplained, (
        f"points without their direction: {unexplained}; a comment with a signed figure "
        f"(-1, +5) must say one of {words} (K13.3), or write the figure unsigned "
        f"('a negative number')"
    )


# The reasons NewGame refuses a request field with (service/krypkasino_api.py, new_game;
# docs/api.md, "Errors", names each one's field; service.reasons lists them all), by that
# field's full name.
NEW_GAME_FIELD_REASONS: dict[str, tuple[str, ...]] = {
    f"{PACKAGE}.NewGameRequest.config": ("CONFIG_INVALID",),
    f"{PACKAGE}.NewGameRequest.seed": ("CHOSEN_DEAL_REFUSED",),
    f"{PACKAGE}.NewGameRequest.decks": ("TOO_MANY_DECKS", "DECK_INVALID", "CHOSEN_DEAL_REFUSED"),
    f"{PACKAGE}.NewGameRequest.draw": (
        "DRAW_WITHOUT_DRAW_FOR_DEAL",
        "DRAW_INVALID",
        "DRAW_EXHAUSTED",
        "CHOSEN_DEAL_REFUSED",
    ),
}


def test_each_newgame_field_names_the_reasons_it_is_refused_with(notes: dict[str, str]) -> None:
    """A client generated from the protos alone learns from a field's comment why NewGame
    may refuse it; CHOSEN_DEAL_REFUSED also with its code and that it is the server's
    setting (--refuse-chosen-deals), since the same request passes another server."""
    documented = {refusal.reason for refusal in REFUSAL_REASONS}
    for field, reasons in NEW_GAME_FIELD_REASONS.items():
        note = flat(notes[field])
        for reason in reasons:
            assert reason in documented, reason
            assert reason in note, f"{field} does not name {reason}"
        if "CHOSEN_DEAL_REFUSED" in reasons:
            for needed in ("--refuse-chosen-deals", "INVALID_ARGUMENT", "a setting of the server"):
                assert needed in note, f"{field} does not say {needed!r}"
    chosen = {
        field
        for field, reasons in NEW_GAME_FIELD_REASONS.items()
        if "CHOSEN_DEAL_REFUSED" in reasons
    }
    assert {name.rsplit(".", 1)[1] for name in chosen} == {"seed", "decks", "draw"}


# A proto of each comment layout the protos may come to use, beside the ones they use now.
LAYOUTS_PROTO = """syntax = "proto3";
package layouts.v1;

// Leading on Layouts.
message Layouts {
  int32 only_trailing = 1; // Trailing only.
  // Leading wins.
  int32 both = 2; // Trailing loses.
  // First paragraph.
  //
  //
  // Second after two blank lines.
  //
  //
  //
  // Third after three blank lines.
  int32 blank_lines = 3;
  int32 uncommented = 4;
  // A nested message.
  message Inner {
    // A nested field.
    int32 depth = 1;
  }
  // A nested enum.
  enum Kind {
    // The nested zero.
    KIND_UNSPECIFIED = 0;
  }
}
"""


@pytest.fixture(scope="module")
def layout_notes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The comments of ``LAYOUTS_PROTO`` as protoc reads them (``--include_source_info``)."""
    folder = tmp_path_factory.mktemp("layouts")
    (folder / "layouts.proto").write_text(LAYOUTS_PROTO)
    output = folder / "layouts.binpb"
    arguments = [f"-I{folder}", "--include_source_info", f"--descriptor_set_out={output}"]
    assert protoc.main(["grpc_tools.protoc", *arguments, "layouts.proto"]) == 0
    return comments(descriptor_pb2.FileDescriptorSet.FromString(output.read_bytes()))


def test_a_trailing_comment_describes_only_what_has_no_leading_one(
    layout_notes: dict[str, str],
) -> None:
    assert layout_notes["layouts.v1.Layouts.only_trailing"] == "Trailing only."
    assert layout_notes["layouts.v1.Layouts.both"] == "Leading wins."


def test_runs_of_blank_comment_lines_make_one_paragraph_break(
    layout_notes: dict[str, str],
) -> None:
    assert layout_notes["layouts.v1.Layouts.blank_lines"] == (
        "First paragraph.\n\nSecond after two blank lines.\n\nThird after three blank lines."
    )


def test_a_declaration_without_a_comment_has_no_description(
    layout_notes: dict[str, str],
) -> None:
    assert "layouts.v1.Layouts.uncommented" not in layout_notes
    assert layout_notes["layouts.v1.Layouts"] == "Leading on Layouts."


def test_nested_types_and_their_members_are_described(layout_notes: dict[str, str]) -> None:
    assert {
        name: text for name, text in layout_notes.items() if ".Inner" in name or ".Kind" in name
    } == {
        "layouts.v1.Layouts.Inner": "A nested message.",
        "layouts.v1.Layouts.Inner.depth": "A nested field.",
        "layouts.v1.Layouts.Kind": "A nested enum.",
        "layouts.v1.Layouts.Kind.KIND_UNSPECIFIED": "The nested zero.",
    }
