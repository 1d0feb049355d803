"""Regenerate the Python code of the API from proto/ (``make generate``).

Writes the protobuf and gRPC modules and their mypy stubs into the client
package, ``clients/python/src/cardrules``, which the server uses too. The
output depends only on the proto files and the pinned grpcio-tools and
mypy-protobuf, so ``tests/service/test_generated.py`` can regenerate into a
temporary folder and insist on byte-identical files.

Usage: python scripts/generate_protos.py [OUTPUT_ROOT]
"""

from __future__ import annotations

import sys
from importlib.resources import files
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
THIRD_PARTY = ROOT / "third_party" / "googleapis"
DEFAULT_OUTPUT = ROOT / "clients" / "python" / "src"
PACKAGES = (
    "cardrules/cards",
    "cardrules/cards/v1",
    "cardrules/krypkasino",
    "cardrules/krypkasino/v1",
)


def proto_files() -> list[Path]:
    return sorted(PROTO_ROOT.rglob("*.proto"))


def generate(output: Path) -> list[Path]:
    """Run protoc with the Python, gRPC and mypy plugins; return the files written."""
    output.mkdir(parents=True, exist_ok=True)
    plugin_dir = Path(sys.executable).parent
    well_known = files("grpc_tools") / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{THIRD_PARTY}",
        f"-I{well_known}",
        f"--plugin=protoc-gen-mypy={plugin_dir / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={plugin_dir / 'protoc-gen-mypy_grpc'}",
        f"--python_out={output}",
        f"--grpc_python_out={output}",
        f"--mypy_out={output}",
        f"--mypy_grpc_out={output}",
        *(str(path.relative_to(PROTO_ROOT)) for path in proto_files()),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for package in PACKAGES:
        init = output / package / "__init__.py"
        init.write_text('"""Generated from proto/ by scripts/generate_protos.py; do not edit."""\n')
    return sorted(p for p in output.rglob("*") if p.is_file() and _generated(p))


def _generated(path: Path) -> bool:
    return path.name.endswith(("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")) or (
        path.name == "__init__.py" and any(str(path).endswith(p + "/__init__.py") for p in PACKAGES)
    )


def main() -> int:
    output = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUTPUT
    for path in generate(output):
        print(path.relative_to(output))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
