"""Regenerate the OpenAPI document of the HTTP gateway from proto/.

protoc (from grpcio-tools) writes a descriptor set with source info, so the
proto comments become descriptions; ``service.openapi`` builds the document
from the service descriptors and those comments. The output depends only on
the proto files, so ``tests/service/test_http_openapi.py`` regenerates it and
insists on identical bytes.

Usage: python scripts/generate_openapi.py [OUTPUT]   (default: service/cardrules.openapi.json)
"""

from __future__ import annotations

import sys
import tempfile
from importlib.resources import files
from pathlib import Path

from google.protobuf import descriptor_pb2
from grpc_tools import protoc

from scripts.generate_protos import PROTO_ROOT, THIRD_PARTY, proto_files
from service.openapi import COMMITTED, build_document, comments, render


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


def generate() -> bytes:
    """The document, as committed."""
    return render(build_document(notes=comments(descriptor_set())))


def main() -> int:
    output = Path(sys.argv[1]) if len(sys.argv) > 1 else COMMITTED
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(generate())
    print(output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
