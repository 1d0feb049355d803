"""The protos evolve only in compatible ways (docs/api.md, "State tokens"; design section 3: v1).

``fixtures/released_protos/`` holds a Buf image of the protos each time they
changed on main; ``buf breaking`` with buf.yaml's ``FILE`` rules compares the
working protos with every one. Those rules are the strictest: besides the
wire and JSON forms that tokens and HTTP clients depend on (no field
renumbered, retyped or renamed), they keep the generated code's modules,
names and field presence, which the shipped Python client is made of. A
state token the fixtures' token test does not reach (a field their games
never set) is protected only here.

Main is what deploys, so a proto change that lands there is released: a
build of it may have sealed tokens or answered clients with it. So the
newest image must hold every field, enum value and method of the working
protos (a test), and a change adds an image, in the same commit, once it
passes against the earlier ones; an image is never replaced. Build the proto
module alone, as the earlier images were: an image of the whole workspace also
holds the vendored google/rpc files, which ``buf breaking`` then calls deleted::

    node_modules/.bin/buf build proto --exclude-source-info \\
        -o tests/service/fixtures/released_protos/N-what-changed.binpb
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

ROOT = Path(__file__).resolve().parents[2]
BUF = ROOT / "node_modules" / ".bin" / "buf"
RELEASED = sorted(
    (Path(__file__).parent / "fixtures" / "released_protos").glob("*.binpb"),
    key=lambda path: int(path.name.split("-", 1)[0]),
)
NEWEST = RELEASED[-1]
KRYPKASINO = Path("proto/cardrules/krypkasino/v1/krypkasino.proto")


def run_buf(workspace: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    assert BUF.exists(), f"{BUF} is missing: run `npm ci` (make test does)"
    return subprocess.run(
        [str(BUF), *arguments],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def buf_breaking(workspace: Path, against: Path = NEWEST) -> subprocess.CompletedProcess[str]:
    return run_buf(workspace, "breaking", "--against", str(against))


def declared(image: Path) -> set[str]:
    """Every field, enum value and method of the cardrules files in a Buf image (a Buf
    image is a ``FileDescriptorSet`` on the wire), named with its number."""
    names: set[str] = set()

    def enum(prefix: str, proto: descriptor_pb2.EnumDescriptorProto) -> None:
        names.update(f"{prefix}{proto.name}.{v.name} = {v.number}" for v in proto.value)

    def message(prefix: str, proto: descriptor_pb2.DescriptorProto) -> None:
        name = f"{prefix}{proto.name}"
        names.update(f"{name}.{field.name} = {field.number}" for field in proto.field)
        for nested in proto.nested_type:
            message(f"{name}.", nested)
        for nested_enum in proto.enum_type:
            enum(f"{name}.", nested_enum)

    for file in descriptor_pb2.FileDescriptorSet.FromString(image.read_bytes()).file:
        if not file.package.startswith("cardrules."):
            continue
        prefix = f"{file.package}."
        for proto in file.message_type:
            message(prefix, proto)
        for enum_proto in file.enum_type:
            enum(prefix, enum_proto)
        for service in file.service:
            names.update(f"{prefix}{service.name}/{method.name}" for method in service.method)
    return names


@pytest.mark.parametrize("released", RELEASED, ids=lambda path: path.stem)
def test_the_protos_are_compatible_with_the_released_ones(released: Path) -> None:
    result = buf_breaking(ROOT, released)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_newest_released_image_holds_all_of_the_working_protos(tmp_path: Path) -> None:
    """A field added after the newest image was made (``GameState.last_move`` was, by a
    day) is in tokens that builds of main have sealed, yet nothing would stop a later
    change from renumbering it and stranding every game in flight at that upgrade."""
    working = tmp_path / "working.binpb"
    built = run_buf(ROOT, "build", "--exclude-source-info", "-o", str(working))
    assert built.returncode == 0, built.stdout + built.stderr
    unreleased = sorted(declared(working) - declared(NEWEST))
    assert not unreleased, (
        f"not in {NEWEST.name}: {unreleased}; add an image (this module's docstring)"
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of the Buf workspace whose protos a test may edit."""
    for part in ("proto", "third_party"):
        shutil.copytree(ROOT / part, tmp_path / part)
    shutil.copy(ROOT / "buf.yaml", tmp_path)
    return tmp_path


def edit(workspace: Path, old: str, new: str) -> None:
    path = workspace / KRYPKASINO
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} must occur once in {KRYPKASINO}"
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize(
    ("old", "new", "complaint"),
    [
        # A token sealed before the upgrade would lose its set-aside pile.
        ("bytes set_aside = 14;", "bytes set_aside = 44;", 'field "14" with name "set_aside"'),
        ("int32 deal = 8;", "int64 deal = 8;", 'changed type from "int32" to "int64"'),
        # HTTP/JSON clients send and read the name.
        ("int32 deal = 8;", "int32 deal_number = 8;", 'changed name from "deal" to "deal_number"'),
        ("TEAM_MODE_TRIOS = 3;", "", 'enum value "3" on enum "TeamMode"'),
        ("rpc GetView(", "rpc ReadView(", 'RPC "GetView"'),
    ],
)
def test_an_incompatible_change_is_refused(
    workspace: Path, old: str, new: str, complaint: str
) -> None:
    edit(workspace, old, new)
    result = buf_breaking(workspace)
    assert result.returncode != 0
    assert complaint in result.stdout, result.stdout + result.stderr


def test_a_new_field_is_compatible(workspace: Path) -> None:
    edit(workspace, "bytes set_aside = 14;", "bytes set_aside = 14;\n  bytes graveyard = 999;")
    result = buf_breaking(workspace)
    assert result.returncode == 0, result.stdout + result.stderr
