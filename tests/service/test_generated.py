"""The committed generated code and vendored protos match a fresh generation (design section 1)."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

from cardrules.krypkasino.v1 import krypkasino_pb2, krypkasino_pb2_grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from scripts.generate_openapi import descriptor_set, same_file, stale_generated
from scripts.generate_protos import DEFAULT_OUTPUT, THIRD_PARTY, generate

ROOT = Path(__file__).resolve().parents[2]


def test_committed_code_matches_fresh_generation(tmp_path: Path) -> None:
    fresh = generate(tmp_path)
    assert fresh, "the generator wrote nothing"
    for path in fresh:
        relative = path.relative_to(tmp_path)
        committed = DEFAULT_OUTPUT / relative
        assert committed.exists(), f"{relative} is generated but not committed: run make generate"
        assert committed.read_bytes() == path.read_bytes(), f"{relative} differs: run make generate"
    stale = {
        p.relative_to(DEFAULT_OUTPUT)
        for p in DEFAULT_OUTPUT.rglob("*_pb2*.py*")
        # Not the bytecode Python writes beside them (__pycache__/*.pyc) on import.
        if p.suffix in (".py", ".pyi") and not (tmp_path / p.relative_to(DEFAULT_OUTPUT)).exists()
    }
    assert not stale, f"generated files without a proto: {sorted(map(str, stale))}"


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
