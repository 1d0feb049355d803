"""The Buf templates of docs/api.md ("gRPC clients in other languages"): ``buf.gen.yaml``
gives the cardrules files the language options it names, leaves the vendored googleapis
files their own and leaves their code to the languages' googleapis libraries;
``buf.gen.cpp.yaml`` generates the googleapis files the C++ code includes, C++ having no
such library; each message generator comes with its gRPC plugin, since none of them
makes service stubs (the docs said third_party on the import path was enough).

A review found that managed mode with ``java_package_prefix`` and
``csharp_namespace_prefix`` also rewrites third_party/googleapis's files in this
workspace (``com.studio.google.rpc.Status``), duplicating the classes grpc-java's
StatusProto and the googleapis libraries use; ``disable: - path: google`` keeps them as
they are. The documented template and command are run with the pinned buf, offline (the
workspace has no dependencies), with the template's plugins replaced by a local one,
written in Python, that lists the options each file reaches its plugins with.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import descriptor_pb2

from tests.doc_blocks import fenced_blocks

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api.md"
BUF = ROOT / "node_modules" / ".bin" / "buf"
SECTION = "\n## gRPC clients in other languages\n"
CARDRULES = ("cardrules/cards/v1/cards.proto", "cardrules/krypkasino/v1/krypkasino.proto")
GOOGLE_RPC_STATUS = "google/rpc/status.proto"
MAIN, CPP = "buf.gen.yaml", "buf.gen.cpp.yaml"
# The google/rpc files of a refusal's details (docs/api.md, "Errors").
DETAILS = ("google/rpc/status.proto", "google/rpc/error_details.proto")
# Each message generator of a template, and the gRPC plugin that makes its stubs.
STUBS = {
    "java": "protoc-gen-grpc-java",
    "csharp": "grpc_csharp_plugin",
    "cpp": "grpc_cpp_plugin",
    "protoc-gen-go": "protoc-gen-go-grpc",
}
# Each language's googleapis library (Go's in two modules), which the docs name.
LIBRARIES = (
    "proto-google-common-protos",
    "Google.Api.CommonProtos",
    "google.golang.org/genproto/googleapis/api",
)

# A protoc plugin that writes, for each file of the request, the options a real plugin
# would generate it with; and which files it is asked to generate.
PLUGIN = """
import json
import sys

from google.protobuf.compiler import plugin_pb2

request = plugin_pb2.CodeGeneratorRequest.FromString(sys.stdin.buffer.read())
response = plugin_pb2.CodeGeneratorResponse(
    supported_features=plugin_pb2.CodeGeneratorResponse.FEATURE_PROTO3_OPTIONAL
)
files = {
    file.name: {
        "package": file.package,
        "java_package": file.options.java_package,
        "java_multiple_files": file.options.java_multiple_files,
        "csharp_namespace": file.options.csharp_namespace,
        "objc_class_prefix": file.options.objc_class_prefix,
        "go_package": file.options.go_package,
        "dependency": list(file.dependency),
    }
    for file in request.proto_file
}
listing = {"generate": list(request.file_to_generate), "files": files}
response.file.add(name="options.json", content=json.dumps(listing))
sys.stdout.buffer.write(response.SerializeToString())
"""


def section() -> str:
    return API.read_text(encoding="utf-8").split(SECTION, 1)[1].split("\n## ", 1)[0]


def documented_templates() -> dict[str, dict[str, Any]]:
    """The section's Buf templates, by the file name of their first line's comment."""
    templates: dict[str, dict[str, Any]] = {}
    for block in fenced_blocks(section(), "yaml"):
        name, body = block.split("\n", 1)
        assert name.startswith("# buf.gen") and body.startswith("version: v2\n"), block
        parsed = yaml.safe_load(body)
        assert isinstance(parsed, dict)
        templates[name.removeprefix("# ")] = parsed
    return templates


def documented_commands() -> dict[str, list[str]]:
    """The section's ``buf generate`` commands, by the template each names."""
    commands = [
        shlex.split(line, comments=True)
        for block in fenced_blocks(section(), "sh")
        for line in block.splitlines()
        if line.startswith("node_modules/.bin/buf generate")
    ]
    for command in commands:
        assert command[-2] == "--template", command
    named = {command[-1]: command for command in commands}
    assert sorted(named) == sorted(documented_templates()), named
    return named


def overrides(template: dict[str, Any]) -> dict[str, Any]:
    return {entry["file_option"]: entry["value"] for entry in template["managed"]["override"]}


@dataclass
class Generated:
    generate: list[str]
    files: dict[str, dict[str, Any]]


def generate(
    template: dict[str, Any], command: list[str], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """``command`` run at the repository root with ``template``, its plugins replaced by
    the listing plugin, writing under ``tmp_path``."""
    assert BUF.exists(), f"{BUF} is missing: run `npm ci` (make test does)"
    plugin = tmp_path / "plugin.py"
    plugin.write_text(PLUGIN, encoding="utf-8")
    listing = {
        **template,
        "plugins": [{"local": [sys.executable, str(plugin)], "strategy": "all", "out": "listing"}],
    }
    path = tmp_path / "buf.gen.yaml"
    path.write_text(yaml.safe_dump(listing), encoding="utf-8")
    arguments = [*command[:-1], str(path), "-o", str(tmp_path / "out")]
    return subprocess.run(
        [str(ROOT / arguments[0]), *arguments[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        # An empty cache of its own: nothing fetched or cached before is needed.
        env={**os.environ, "BUF_CACHE_DIR": str(tmp_path / "cache")},
    )


def generated(template: dict[str, Any], command: list[str], tmp_path: Path) -> Generated:
    done = generate(template, command, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    listing = json.loads((tmp_path / "out" / "listing" / "options.json").read_text())
    return Generated(listing["generate"], listing["files"])


@cache
def workspace_image() -> descriptor_pb2.FileDescriptorSet:
    """Buf's image of the workspace, without managed mode."""
    return descriptor_pb2.FileDescriptorSet.FromString(
        subprocess.run(
            [str(BUF), "build", "--exclude-source-info", "-o", "-"],
            cwd=ROOT,
            capture_output=True,
            timeout=120,
            check=True,
        ).stdout
    )


def own_options(name: str) -> descriptor_pb2.FileOptions:
    """The options ``name`` (a file of the workspace) sets itself."""
    (file,) = [file for file in workspace_image().file if file.name == name]
    return file.options


def pascal(package: str) -> str:
    return ".".join(part[:1].upper() + part[1:] for part in package.split("."))


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    """The template for Java, C# and Go."""
    return documented_templates()[MAIN]


def test_the_cardrules_files_get_the_documented_options(
    template: dict[str, Any], tmp_path: Path
) -> None:
    command = documented_commands()[MAIN]
    options = overrides(template)
    listing = generated(template, command, tmp_path)
    assert sorted(listing.generate) == sorted(CARDRULES)
    for name in CARDRULES:
        file = listing.files[name]
        package = file["package"]
        assert file["java_package"] == f"{options['java_package_prefix']}.{package}"
        assert file["java_multiple_files"] is options["java_multiple_files"] is True
        assert file["csharp_namespace"] == f"{options['csharp_namespace_prefix']}.{pascal(package)}"
        assert file["objc_class_prefix"] == options["objc_class_prefix"]
        folder = name.rsplit("/", 1)[0]
        assert file["go_package"].startswith(f"{options['go_package_prefix']}/{folder};")
    # The names docs/api.md gives as the example's.
    krypkasino = listing.files["cardrules/krypkasino/v1/krypkasino.proto"]
    documented = " ".join(section().split())
    for option in ("java_package", "csharp_namespace", "objc_class_prefix", "go_package"):
        assert f"`{krypkasino[option]}`" in documented, option


def whole_workspace(command: list[str]) -> list[str]:
    """``command`` with the whole workspace as its input (``proto/`` and
    ``third_party/googleapis``), so that google/rpc's files are in the request too."""
    return [argument for argument in command if argument != "proto"]


@pytest.mark.parametrize("source", ["documented", "whole workspace"])
def test_the_googleapis_files_keep_their_own_options(
    template: dict[str, Any], tmp_path: Path, source: str
) -> None:
    command = documented_commands()[MAIN]
    if source == "whole workspace":
        command = whole_workspace(command)
    listing = generated(template, command, tmp_path)
    google = [name for name in listing.files if name.startswith("google/")]
    assert "google/api/annotations.proto" in google, google
    for name in google:
        if name.startswith("google/protobuf/"):
            continue  # the well-known types, which managed mode never changes
        own = own_options(name)
        file = listing.files[name]
        assert file["java_package"] == own.java_package, name
        assert file["csharp_namespace"] == own.csharp_namespace, name
        assert file["objc_class_prefix"] == own.objc_class_prefix, name
        assert file["go_package"] == own.go_package, name
    assert listing.files["google/api/annotations.proto"]["java_package"] == "com.google.api"
    if source == "whole workspace":
        status = listing.files[GOOGLE_RPC_STATUS]
        assert (status["java_package"], status["objc_class_prefix"]) == ("com.google.rpc", "RPC")
        assert status["go_package"] == "google.golang.org/genproto/googleapis/rpc/status;status"


def test_without_the_disable_the_prefixes_reach_google_rpc(
    template: dict[str, Any], tmp_path: Path
) -> None:
    """What the docs warn of: the whole workspace as input, so that google/rpc's files
    are in the request, and no ``disable``."""
    unguarded = {**template, "managed": {**template["managed"]}}
    unguarded["managed"].pop("disable", None)
    options = overrides(template)
    command = documented_commands()[MAIN]
    status = generated(unguarded, whole_workspace(command), tmp_path).files[GOOGLE_RPC_STATUS]
    assert status["java_package"] == f"{options['java_package_prefix']}.google.rpc"
    assert status["csharp_namespace"] == f"{options['csharp_namespace_prefix']}.Google.Rpc"
    for name in (f"{status['java_package']}.Status", f"{status['csharp_namespace']}.Status"):
        assert f"`{name}`" in " ".join(section().split()), name


def test_a_disable_by_module_path_is_refused(template: dict[str, Any], tmp_path: Path) -> None:
    by_module = {**template, "managed": {**template["managed"]}}
    by_module["managed"]["disable"] = [{"module": "third_party/googleapis"}]
    command = documented_commands()[MAIN]
    done = generate(by_module, command, tmp_path)
    assert done.returncode != 0
    assert "registry/owner/name" in done.stderr
    assert "registry/owner/name" in section()


def imported(files: dict[str, dict[str, Any]], names: tuple[str, ...]) -> set[str]:
    """The files ``names`` import, directly or not."""
    found: set[str] = set()
    todo = [dependency for name in names for dependency in files[name]["dependency"]]
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo.extend(files[name]["dependency"])
    return found


def test_the_cpp_template_generates_every_googleapis_file_the_cardrules_code_needs(
    tmp_path: Path,
) -> None:
    """C++ has no googleapis library: generated C++ includes ``google/api/*.pb.h`` for
    each file the cardrules files import, so those are generated with them, and so are
    the details a refusal holds. protobuf's own (``google/protobuf/descriptor.proto``)
    come with the protobuf library."""
    listing = generated(documented_templates()[CPP], documented_commands()[CPP], tmp_path)
    needed = {
        name
        for name in imported(listing.files, CARDRULES)
        if not name.startswith("google/protobuf/")
    }
    assert "google/api/field_behavior.proto" in needed, needed
    missing = (needed | {*DETAILS, *CARDRULES}) - set(listing.generate)
    assert not missing, missing


def test_the_template_for_libraries_leaves_the_googleapis_files_to_them(tmp_path: Path) -> None:
    """Generated beside a googleapis library, google/api's classes would be there twice."""
    listing = generated(documented_templates()[MAIN], documented_commands()[MAIN], tmp_path)
    assert not [name for name in listing.generate if name.startswith("google/")]
    assert imported(listing.files, CARDRULES) >= {"google/api/field_behavior.proto"}


def plugin_name(plugin: dict[str, Any]) -> str:
    return str(plugin.get("protoc_builtin") or plugin["local"])


@pytest.mark.parametrize("name", [MAIN, CPP])
def test_each_message_generator_comes_with_its_grpc_plugin(name: str) -> None:
    """protoc's built-in generators and protoc-gen-go make messages, no service stubs."""
    plugins = documented_templates()[name]["plugins"]
    outputs = {plugin_name(plugin): plugin["out"] for plugin in plugins}
    messages = [plugin for plugin in outputs if plugin in STUBS]
    assert messages, outputs
    for plugin in messages:
        assert outputs.get(STUBS[plugin]) == outputs[plugin], (plugin, outputs)


def test_the_docs_name_the_googleapis_libraries_and_the_grpc_plugins() -> None:
    text = " ".join((ROOT / "docs" / "api.md").read_text(encoding="utf-8").split())
    missing = [name for name in (*LIBRARIES, *STUBS.values()) if name not in text]
    assert not missing, missing
