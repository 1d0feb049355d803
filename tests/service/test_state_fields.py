"""service/state_fields.py: the fingerprint of the state message's structure, which says
whether two releases seal the same state message, so that neither refuses the other's
tokens as TOKEN_FROM_NEWER_RELEASE (README.md, "The service").

Real descriptors throughout: the released Buf images of tests/service/fixtures/
released_protos/ (test_proto_compat.py says how they are made) and edited copies of
today's protos, each loaded into a fresh ``DescriptorPool``.
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, FileDescriptor

from service.server import SCHEMA_VERSION
from service.state_fields import state_fields
from tests.service.server_process import CARDRULES
from tests.service.test_proto_compat import NEWEST, RELEASED

GAME_STATE = pb.GameState.DESCRIPTOR.full_name
KRYPKASINO = pb.DESCRIPTOR.name
CARDS = "cardrules/cards/v1/cards.proto"
FileEdit = Callable[[dict[str, descriptor_pb2.FileDescriptorProto]], None]


def state_of(files: list[descriptor_pb2.FileDescriptorProto]) -> Descriptor:
    """``GameState`` of ``files``, dependencies first, loaded into a fresh pool."""
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        pool.Add(file)
    return pool.FindMessageTypeByName(GAME_STATE)


def image(stem: str) -> list[descriptor_pb2.FileDescriptorProto]:
    """The files of a released image (a Buf image is a ``FileDescriptorSet``)."""
    (path,) = [path for path in RELEASED if path.stem == stem]
    return list(descriptor_pb2.FileDescriptorSet.FromString(path.read_bytes()).file)


def image_fingerprint(path: Path) -> str:
    return state_fields(state_of(image(path.stem)))


def todays_files() -> list[descriptor_pb2.FileDescriptorProto]:
    """The live module's file and every file it imports, dependencies first, as protos."""
    ordered: list[descriptor_pb2.FileDescriptorProto] = []
    seen: set[str] = set()

    def add(file: FileDescriptor) -> None:
        if file.name in seen:
            return
        seen.add(file.name)
        for dependency in file.dependencies:
            add(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        ordered.append(proto)

    add(pb.DESCRIPTOR)
    return ordered


def edited(edit: FileEdit) -> str:
    """The fingerprint of today's protos after ``edit`` (given the files by name)."""
    files = todays_files()
    edit({file.name: file for file in files})
    return state_fields(state_of(files))


def message(
    files: dict[str, descriptor_pb2.FileDescriptorProto], name: str, file: str = KRYPKASINO
) -> descriptor_pb2.DescriptorProto:
    (found,) = [proto for proto in files[file].message_type if proto.name == name]
    return found


def enum(
    files: dict[str, descriptor_pb2.FileDescriptorProto], name: str, file: str = KRYPKASINO
) -> descriptor_pb2.EnumDescriptorProto:
    (found,) = [proto for proto in files[file].enum_type if proto.name == name]
    return found


def test_the_first_release_lacks_last_move_and_has_its_own_fingerprint():
    """2-last-move added ``GameState.last_move``: a build of 1-first-release refuses the
    tokens of any later one (TOKEN_FROM_NEWER_RELEASE), and the fingerprints say so."""
    first, second = (state_of(image(stem)) for stem in ("1-first-release", "2-last-move"))
    assert "last_move" not in first.fields_by_name and "last_move" in second.fields_by_name
    assert state_fields(first) != state_fields(second)


def test_images_that_changed_only_other_messages_keep_the_fingerprint():
    """3 and 4 changed ``ScoreResponse`` and ``LegalMove``, outside the state's closure:
    their builds read 2's tokens and it theirs, so the fingerprint is the same."""
    stems = ["2-last-move", "3-score-tiebreak-teams", "4-legal-move-sweep-ranks-after"]
    krypkasino_files = [
        next(file for file in image(stem) if file.name == KRYPKASINO) for stem in stems
    ]
    assert krypkasino_files[0] != krypkasino_files[1] != krypkasino_files[2]  # not vacuous
    assert len({state_fields(state_of(image(stem))) for stem in stems}) == 1


def test_the_fingerprints_of_released_images_never_change():
    """Operators compare the fingerprints of builds made with other protobuf runtimes and
    other releases of this module: for a released state message it is fixed for good."""
    assert {path.stem: image_fingerprint(path) for path in RELEASED} == {
        "1-first-release": "48155da1",
        "2-last-move": "977f88b5",
        "3-score-tiebreak-teams": "977f88b5",
        "4-legal-move-sweep-ranks-after": "977f88b5",
    }


def test_the_newest_image_has_todays_fingerprint():
    """Changing ``GameState`` needs a new image (test_proto_compat.py enforces that every
    field is in the newest one); the fingerprint a build prints must then be the image's."""
    assert image_fingerprint(NEWEST) == state_fields()


def test_todays_protos_in_a_fresh_pool_have_the_live_modules_fingerprint():
    assert re.fullmatch("[0-9a-f]{8}", state_fields())
    assert edited(lambda files: None) == state_fields()


def _add_state_field(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> None:
    message(files, "GameState").field.add(
        name="graveyard", number=99, type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
    )


def _add_played_move_field(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> None:
    """``PlayedMove`` is reached through ``GameState.last_move``."""
    message(files, "PlayedMove").field.add(
        name="note", number=4, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING
    )


def _add_tie_rule_value(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> None:
    """``TieRule`` is reached through ``GameState.config.tie_rule``."""
    enum(files, "TieRule").value.add(name="TIE_RULE_COIN_TOSS", number=9)


def _retype_a_field(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> None:
    (deal,) = [field for field in message(files, "GameState").field if field.name == "deal"]
    deal.type = descriptor_pb2.FieldDescriptorProto.TYPE_INT64


def _repeat_a_field(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> None:
    (seed,) = [field for field in message(files, "GameState").field if field.name == "seed"]
    seed.label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED


@pytest.mark.parametrize(
    "edit",
    [
        _add_state_field,
        _add_played_move_field,
        _add_tie_rule_value,
        _retype_a_field,
        _repeat_a_field,
    ],
)
def test_a_change_inside_the_state_message_changes_the_fingerprint(edit: FileEdit) -> None:
    assert edited(edit) != state_fields()


def test_an_imported_enum_reached_from_the_state_is_covered():
    """Imported types count as the state's own: with a ``GameState`` field of
    ``cardrules.cards.v1.Card``, a new ``Rank`` value changes the fingerprint."""
    card_type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE

    def with_a_card(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> None:
        message(files, "GameState").field.add(
            name="turned", number=99, type=card_type, type_name=".cardrules.cards.v1.Card"
        )

    def and_a_new_rank(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> None:
        with_a_card(files)
        enum(files, "Rank", CARDS).value.add(name="RANK_JOKER", number=99)

    assert edited(with_a_card) != edited(and_a_new_rank)


def test_a_type_reached_twice_does_not_end_the_walk():
    """Two new ``GameState`` fields of one type (``Card``), reached before the fields
    declared earlier are walked: ``PlayedMove``, reached through ``last_move``, is still
    covered."""
    card_type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE

    def with_two_cards(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> None:
        for number, name in ((98, "turned"), (99, "burned")):
            message(files, "GameState").field.add(
                name=name, number=number, type=card_type, type_name=".cardrules.cards.v1.Card"
            )

    def and_a_played_move_field(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> None:
        with_two_cards(files)
        _add_played_move_field(files)

    assert edited(with_two_cards) != edited(and_a_played_move_field)


def test_aliases_declared_in_either_order_give_one_fingerprint():
    """Enum values that share a number (``allow_alias``) are sorted by name too."""

    def aliases(*names: str) -> FileEdit:
        def edit(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> None:
            tie_rule = enum(files, "TieRule")
            tie_rule.options.allow_alias = True
            for name in names:
                tie_rule.value.add(name=name, number=9)

        return edit

    first = edited(aliases("TIE_RULE_COIN_TOSS", "TIE_RULE_COIN_FLIP"))
    assert first == edited(aliases("TIE_RULE_COIN_FLIP", "TIE_RULE_COIN_TOSS"))
    assert first != state_fields()


def _comment_and_options(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> None:
    file = files[KRYPKASINO]
    location = file.source_code_info.location.add(path=[4, 0], span=[0, 0, 1])
    location.leading_comments = " A comment that moved.\n"
    file.options.java_package = "com.example.cards"
    state = message(files, "GameState")
    state.options.deprecated = True
    state.field[0].options.deprecated = True


def _reorder_declarations(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> None:
    for proto in (message(files, "GameState"), message(files, "DealScore")):
        fields = list(proto.field)
        del proto.field[:]
        proto.field.extend(reversed(fields))
    values = list(enum(files, "TieRule").value)
    del enum(files, "TieRule").value[:]
    # proto3 wants the zero value first: the others are reversed.
    enum(files, "TieRule").value.extend([values[0], *reversed(values[1:])])
    messages = list(files[KRYPKASINO].message_type)
    del files[KRYPKASINO].message_type[:]
    files[KRYPKASINO].message_type.extend(reversed(messages))


def _change_other_messages(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> None:
    """RPC messages, an enum no state field reaches, a new message and a new method."""
    message(files, "NewGameRequest").field.add(
        name="table_name", number=99, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING
    )
    enum(files, "MoveKind").value.add(name="MOVE_KIND_PASS", number=99)
    files[KRYPKASINO].message_type.add(name="Unrelated")
    files[KRYPKASINO].service[0].method.add(
        name="Ping",
        input_type=".cardrules.krypkasino.v1.Unrelated",
        output_type=".cardrules.krypkasino.v1.Unrelated",
    )


@pytest.mark.parametrize(
    "edit", [_comment_and_options, _reorder_declarations, _change_other_messages]
)
def test_a_change_outside_the_state_message_keeps_the_fingerprint(edit: FileEdit) -> None:
    assert edited(edit) == state_fields()


def test_version_names_the_schema_version_and_the_fingerprint():
    """``cardrules --version``: what an operator compares before a rollback (README.md)."""
    done = subprocess.run(
        [CARDRULES, "--version"], capture_output=True, text=True, check=False, timeout=60
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert re.fullmatch(
        r"cardrules \S+ \(state tokens: schema \d+, fields [0-9a-f]{8}\)\n", done.stdout
    )
    assert done.stdout == (
        f"cardrules {importlib.metadata.version('cardrules')} "
        f"(state tokens: schema {SCHEMA_VERSION}, fields {state_fields()})\n"
    )


#: The docs' example fingerprint: made up, so that no reader takes it for a release's.
DOCS_EXAMPLE_FIELDS = "1a2b3c4d"
DOCS = ("README.md", "docs/api.md", "docs/operations.md", "clients/python/README.md")


def test_the_docs_show_one_made_up_fingerprint_in_the_version_s_form():
    """README.md, docs/api.md and docs/operations.md show what ``--version`` prints with
    one example fingerprint, none of a real state message: a real one would read as the
    value to compare with, and go stale when ``GameState`` changes."""
    root = Path(__file__).resolve().parents[2]
    shown = {
        doc: re.findall(
            r"cardrules \S+ \(state tokens: schema \d+, fields ([0-9a-f]{8})\)",
            (root / doc).read_text(),
        )
        for doc in DOCS
    }
    assert all(shown[doc] for doc in DOCS[:3]), shown
    assert {fields for found in shown.values() for fields in found} == {DOCS_EXAMPLE_FIELDS}
    real = {image_fingerprint(path) for path in RELEASED} | {state_fields()}
    assert DOCS_EXAMPLE_FIELDS not in real
