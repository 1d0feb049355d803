"""The committed generated code and vendored protos match a fresh generation (design section 1)."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from cardrules.krypkasino.v1 import krypkasino_pb2, krypkasino_pb2_grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from scripts.generate_openapi import descriptor_set, same_file, stale_generated
from scripts.generate_protos import DEFAULT_OUTPUT, THIRD_PARTY, generate
from service.openapi import COMMITTED

ROOT = Path(__file__).resolve().parents[2]


#: How every generated package's ``__init__.py`` begins, which tells it from the hand-written ones.
GENERATED_INIT = b'"""Generated from proto/ by scripts/generate_protos.py'


def _tree(root: Path) -> dict[Path, bytes]:
    """Every file under ``root`` by its relative path, but the bytecode Python writes
    beside modules it imports (``__pycache__``)."""
    return {
        path.relative_to(root): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def _committed_generated() -> dict[Path, bytes]:
    """The committed files the generator writes: modules, stubs and package markers."""
    return {
        relative: data
        for relative, data in _tree(DEFAULT_OUTPUT).items()
        if ("_pb2" in relative.name and relative.suffix in (".py", ".pyi"))
        or (relative.name == "__init__.py" and data.startswith(GENERATED_INIT))
    }


def test_committed_code_matches_fresh_generation(tmp_path: Path) -> None:
    """The whole tree a fresh generation writes, as it is, not only the files the
    generator says it wrote: the committed generated files are exactly those, byte for
    byte (the modules, their stubs and the packages' ``__init__.py``)."""
    written = generate(tmp_path)
    fresh = _tree(tmp_path)
    assert fresh, "the generator wrote nothing"
    assert sorted(written) == sorted(tmp_path / relative for relative in fresh)
    committed = _committed_generated()
    for relative, data in fresh.items():
        assert relative in committed, (
            f"{relative} is generated but not committed: run make generate"
        )
        assert committed[relative] == data, f"{relative} differs: run make generate"
    stale = sorted(str(relative) for relative in committed.keys() - fresh.keys())
    assert not stale, f"generated files without a proto: {stale}"


def test_the_generator_writes_into_a_new_folder_given_on_its_command_line(tmp_path: Path) -> None:
    """``scripts/generate_protos.py OUTPUT_ROOT`` (its usage) makes the folder, writes there
    and nowhere else, and lists what it wrote."""
    output = tmp_path / "new" / "src"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate_protos.py"), str(output)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == sorted(str(relative) for relative in _tree(output))
    assert _tree(output) == _committed_generated()


#: The vendored googleapis protos: the HTTP annotations and field behaviours the protos use,
#: and what a client needs to decode a refusal's details (google.rpc.Status, ErrorInfo,
#: BadRequest).
VENDORED = (
    "google/api/annotations.proto",
    "google/api/field_behavior.proto",
    "google/api/http.proto",
    "google/rpc/code.proto",
    "google/rpc/error_details.proto",
    "google/rpc/status.proto",
)


def test_vendored_googleapis_protos_match_the_pinned_package() -> None:
    vendored = sorted(str(p.relative_to(THIRD_PARTY)) for p in THIRD_PARTY.rglob("*.proto"))
    assert vendored == sorted(VENDORED)
    for relative in VENDORED:
        folder, name = relative.rsplit("/", 1)
        package = importlib.import_module(folder.replace("/", "."))
        pinned = Path(next(iter(package.__path__))) / name
        assert (THIRD_PARTY / relative).read_bytes() == pinned.read_bytes(), relative


def test_the_vendored_protos_readme_names_each_of_them() -> None:
    readme = (THIRD_PARTY / "README.md").read_text()
    missing = [relative for relative in VENDORED if f"`{relative}`" not in readme]
    assert not missing, f"third_party/googleapis/README.md does not name {missing}"


def client_floors() -> dict[str, Version]:
    """Each runtime the client requires, with its lower bound (its one ``>=``)."""
    project = tomllib.loads((DEFAULT_OUTPUT.parent / "pyproject.toml").read_text())
    floors: dict[str, Version] = {}
    for requirement in map(Requirement, project["project"]["dependencies"]):
        (lowest,) = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
        floors[canonicalize_name(requirement.name)] = lowest
    return floors


def test_the_client_requires_exactly_the_runtimes_its_stubs_were_generated_for() -> None:
    """Generated code refuses at import a grpcio or protobuf older than its generator's; a
    floor above it would refuse services pinned to the generator's versions for nothing."""
    floors = client_floors()
    source = Path(krypkasino_pb2.__file__).read_text()
    protobuf = re.search(r"^# Protobuf Python Version: (\S+)$", source, re.MULTILINE)
    assert protobuf is not None
    generated = {
        "grpcio": Version(krypkasino_pb2_grpc.GRPC_GENERATED_VERSION),
        "protobuf": Version(protobuf.group(1)),
    }
    for name, version in generated.items():
        assert floors[name] == version, (
            f"{name}>={floors[name]}: the stubs were generated for {version}"
        )


#: The first googleapis-common-protos that admits protobuf 7: 1.73.0 requires protobuf<7,
#: and 1.73.1 to 1.75.5 (protobuf<8) run every path of the client with protobuf 7.
COMMON_PROTOS_FLOOR = Version("1.73.1")


def locked_versions() -> dict[str, Version]:
    """The versions ``requirements/runtime.lock`` pins, by name."""
    lock = (ROOT / "requirements" / "runtime.lock").read_text()
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", lock, re.MULTILINE)
    return {canonicalize_name(name): Version(version) for name, version in pins}


def test_the_client_admits_every_common_protos_that_runs_it_and_the_locked_runtime() -> None:
    """googleapis-common-protos has no generated code of ours, so its floor is the first
    release the protobuf floor allows: a higher one (it was 1.76) turned away services
    pinned to 1.73.1 to 1.75.5, which run the client. No floor is above what the server
    runs with, the runtime lock's pin, or the locked install would not hold the client."""
    floors = client_floors()
    assert floors["googleapis-common-protos"] == COMMON_PROTOS_FLOOR
    locked = locked_versions()
    for name, floor in floors.items():
        assert floor <= locked[name], (
            f"{name}>={floor}, but requirements/runtime.lock pins {locked[name]}"
        )


def test_the_openapi_script_tells_stale_generated_code_from_fresh() -> None:
    """The OpenAPI document takes its schemas from the imported generated code and its
    descriptions from proto/: ``scripts/generate_openapi.py`` refuses to pair a proto
    change with the code generated before it (``stale_generated``)."""
    fresh = descriptor_set()
    assert stale_generated(fresh) == []
    for file in fresh.file:
        if file.name == "cardrules/krypkasino/v1/krypkasino.proto":
            (rules,) = [m for m in file.message_type if m.name == "Rules"]
            added = rules.field.add()
            added.CopyFrom(rules.field[0])
            added.name, added.number, added.json_name = "house_flag", 99, "houseFlag"
    assert stale_generated(fresh) == ["cardrules/krypkasino/v1/krypkasino.proto"]
    # A proto file of a new version, for which nothing was generated yet.
    added_file = fresh.file.add(name="cardrules/krypkasino/v2/krypkasino.proto")
    added_file.package = "cardrules.krypkasino.v2"
    assert stale_generated(fresh) == [
        "cardrules/krypkasino/v1/krypkasino.proto",
        "cardrules/krypkasino/v2/krypkasino.proto",
    ]


def _generate_openapi(
    output: Path, proto_root: Path = ROOT / "proto"
) -> subprocess.CompletedProcess[str]:
    """``scripts/generate_openapi.py OUTPUT`` reading the protos of ``proto_root``."""
    script = (
        "import sys; from pathlib import Path; import scripts.generate_protos as protos; "
        "import scripts.generate_openapi as openapi; "
        f"protos.PROTO_ROOT = openapi.PROTO_ROOT = Path({str(proto_root)!r}); "
        "sys.exit(openapi.main())"
    )
    return subprocess.run(
        [sys.executable, "-c", script, str(output)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_the_openapi_script_writes_the_committed_document_from_fresh_code(tmp_path: Path) -> None:
    output = tmp_path / "new" / "cardrules.openapi.json"
    done = _generate_openapi(output)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{output}\n", "")
    assert output.read_bytes() == COMMITTED.read_bytes()


def test_the_openapi_script_refuses_code_older_than_the_protos(tmp_path: Path) -> None:
    """A field added to a proto without ``make generate``: exit 1, the file named, and
    nothing written."""
    protos = tmp_path / "proto"
    shutil.copytree(ROOT / "proto", protos)
    cards = protos / "cardrules" / "cards" / "v1" / "cards.proto"
    text = cards.read_text()
    assert text.count("\nmessage Card {\n") == 1
    cards.write_text(text.replace("\nmessage Card {\n", "\nmessage Card {\n  int32 added = 99;\n"))
    output = tmp_path / "cardrules.openapi.json"
    done = _generate_openapi(output, protos)
    assert done.returncode == 1 and not output.exists()
    assert "stale against proto/ for cardrules/cards/v1/cards.proto" in done.stderr


def test_an_explicit_json_name_is_fresh_when_it_matches_and_stale_when_it_differs() -> None:
    """The generated code embeds a field's ``json_name`` only when a ``[json_name = ...]``
    option set it, while protoc's descriptor set always fills it: an option that repeats
    the derived name must not read as stale code (it did, so ``make generate`` never
    cleared the refusal), and one that renames the field must."""
    fresh_set = descriptor_set()
    (fresh,) = [f for f in fresh_set.file if f.name == "cardrules/krypkasino/v1/krypkasino.proto"]
    imported = descriptor_pb2.FileDescriptorProto.FromString(
        descriptor_pool.Default().FindFileByName(fresh.name).serialized_pb
    )
    (view,) = [m for m in imported.message_type if m.name == "View"]
    (game_id,) = [f for f in view.field if f.name == "game_id"]
    game_id.json_name = "gameId"
    assert same_file(fresh, imported)
    game_id.json_name = "gameIdentifier"
    assert not same_file(fresh, imported)


def test_a_nested_messages_derived_json_names_are_not_read_as_stale() -> None:
    """The protos nest no message yet; one that did must compare as its top-level ones do:
    protoc fills the nested fields' derived ``json_name``, the generated code does not."""
    fresh_set = descriptor_set()
    (fresh,) = [f for f in fresh_set.file if f.name == "cardrules/krypkasino/v1/krypkasino.proto"]
    imported = descriptor_pb2.FileDescriptorProto.FromString(
        descriptor_pool.Default().FindFileByName(fresh.name).serialized_pb
    )
    for file, json_name in ((fresh, "turnCount"), (imported, None)):
        (view,) = [m for m in file.message_type if m.name == "View"]
        nested = view.nested_type.add(name="Nested").field.add(name="turn_count", number=1)
        nested.type, nested.label = nested.TYPE_INT32, nested.LABEL_OPTIONAL
        if json_name:
            nested.json_name = json_name
    assert same_file(fresh, imported)
