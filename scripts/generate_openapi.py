"""Regenerate the OpenAPI document of the HTTP gateway.

The document has two sources. Its paths and schemas come from the service and
message descriptors of the generated Python code that ``service.openapi``
imports (``clients/python/src/cardrules/.../*_pb2.py``, written by
``scripts/generate_protos.py``); only its descriptions come from proto/
directly: protoc (from grpcio-tools) writes a descriptor set with source info,
whose comments become the descriptions. So the output depends on the proto
files only while the generated code is fresh: run ``scripts/generate_protos.py``
first (``make generate`` runs both in order). This script refuses to write when
the imported generated code does not match proto/ (``stale_generated``), which
would pair new comments with old schemas. ``tests/service/test_http_openapi.py``
regenerates the document and insists on identical bytes.

Usage: python scripts/generate_openapi.py [OUTPUT]   (default: service/cardrules.openapi.json)
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterable
from importlib.resources import files
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_tools import protoc

from scripts.generate_protos import PROTO_ROOT, THIRD_PARTY, proto_files
from service.openapi import COMMITTED, build_document, render
from service.proto_comments import comments


def descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    """Every proto of proto/ and its imports, with comments (``--include_source_info``)."""
    with tempfile.TemporaryDirectory() as folder:
        output = Path(folder) / "descriptors.binpb"
        args = [
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{THIRD_PARTY}",
            f"-I{files('grpc_tools') / '_proto'}",
            "--include_source_info",
            "--include_imports",
            f"--descriptor_set_out={output}",
            *(str(path.relative_to(PROTO_ROOT)) for path in proto_files()),
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        return descriptor_pb2.FileDescriptorSet.FromString(output.read_bytes())


def _default_json_name(name: str) -> str:
    """The JSON name protoc derives for a field named ``name`` (descriptor.proto's
    ``json_name``: each letter after an underscore upper-cased, the underscores dropped)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _without_derived_json_name(fields: Iterable[descriptor_pb2.FieldDescriptorProto]) -> None:
    """Clear each ``json_name`` that only repeats the derived one: protoc fills every field's
    in a descriptor set, while the generated code's embedded descriptors keep only those a
    ``[json_name = ...]`` option set."""
    for field in fields:
        if field.json_name == _default_json_name(field.name):
            field.ClearField("json_name")


def _without_derived_json_names(messages: Iterable[descriptor_pb2.DescriptorProto]) -> None:
    """``_without_derived_json_name`` on the fields and extensions of ``messages`` and of
    every message nested in them."""
    for message in messages:
        _without_derived_json_name((*message.field, *message.extension))
        _without_derived_json_names(message.nested_type)


def _comparable(file: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    """``file`` without what only one side of ``same_file`` holds: comments, derived names."""
    copy = descriptor_pb2.FileDescriptorProto()
    copy.CopyFrom(file)
    copy.ClearField("source_code_info")
    _without_derived_json_names(copy.message_type)
    _without_derived_json_name(copy.extension)
    return copy


def same_file(
    fresh: descriptor_pb2.FileDescriptorProto, imported: descriptor_pb2.FileDescriptorProto
) -> bool:
    """Whether a proto file as protoc reads it now (``fresh``) is the one the generated code
    embeds (``imported``)."""
    return _comparable(fresh) == _comparable(imported)


def stale_generated(descriptors: descriptor_pb2.FileDescriptorSet) -> list[str]:
    """The cardrules proto files of ``descriptors`` (fresh from proto/) whose generated
    module, as imported, was built from another version of them (or is missing): the
    schemas of the document would not be those of proto/."""
    pool = descriptor_pool.Default()
    stale = []
    for file in descriptors.file:
        if not file.package.startswith("cardrules."):
            continue
        try:
            imported = pool.FindFileByName(file.name)
        except KeyError:
            stale.append(file.name)
            continue
        if not same_file(
            file, descriptor_pb2.FileDescriptorProto.FromString(imported.serialized_pb)
        ):
            stale.append(file.name)
    return stale


def generate(descriptors: descriptor_pb2.FileDescriptorSet | None = None) -> bytes:
    """The document, as committed: schemas from the imported generated code, descriptions
    from ``descriptors`` (by default a fresh ``descriptor_set()`` of proto/)."""
    notes = comments(descriptor_set() if descriptors is None else descriptors)
    return render(build_document(notes=notes))


def main() -> int:
    descriptors = descriptor_set()
    stale = stale_generated(descriptors)
    if stale:
        print(
            f"generate_openapi: the generated Python code is stale against proto/ for "
            f"{', '.join(stale)}: run scripts/generate_protos.py (or make generate) first",
            file=sys.stderr,
        )
        return 1
    output = Path(sys.argv[1]) if len(sys.argv) > 1 else COMMITTED
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(generate(descriptors))
    print(output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
