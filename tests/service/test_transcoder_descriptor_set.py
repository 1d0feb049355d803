"""The descriptor set docs/api.md ("A transcoder in front") says to build for Envoy's
gRPC-JSON transcoder holds what its ``convert_grpc_status`` needs.

The transcoder renders a refusal's ``grpc-status-details-bin`` trailer as the JSON body
only when its descriptor set holds ``google.rpc.Status`` and the details' types.
krypkasino.proto imports none of them, so ``protoc --include_imports`` over ``proto/``
leaves them out and refusals through such a transcoder lose their body and reason (a
review found it). Each documented command is run as written, but for where it writes
(and protoc's, run as grpcio-tools' ``python -m grpc_tools.protoc``, which has the
well-known types built in as protoc does); then a real refusal of a real server is
converted as the transcoder would, with the set's types alone.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf import descriptor_pb2, descriptor_pool, json_format
from google.protobuf.message_factory import GetMessageClass

from tests.doc_blocks import fenced_blocks
from tests.service.grpc_helpers import TIMEOUT, Stub
from tests.service.http_helpers import exchange
from tests.service.server_process import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api.md"
BUF = ROOT / "node_modules" / ".bin" / "buf"
SECTION_TITLE = "**A transcoder in front.**"
SERVICE = "cardrules.krypkasino.v1.KrypkasinoService"
# What convert_grpc_status needs besides the service: the trailer's message and the
# types of the details the service puts in it (docs/api.md, "Errors").
STATUS_TYPES = ("google.rpc.Status", "google.rpc.ErrorInfo", "google.rpc.BadRequest")
# A state token of three bytes: TOKEN_MALFORMED, with a BadRequest naming `state`
# beside its ErrorInfo, so that both detail types are converted.
MALFORMED = {"state": "AAAA", "seat": 1, "seatToken": "AAAA"}


def documented_command(program: str) -> list[str]:
    """The one command of the section's ``sh`` blocks that runs ``program``."""
    section = API.read_text(encoding="utf-8").split(SECTION_TITLE, 1)[1].split("\n- ", 1)[0]
    (command,) = [
        shlex.split(block)
        for block in fenced_blocks(section, "sh")
        if shlex.split(block)[0].endswith(program)
    ]
    return command


def writing_to(command: list[str], output: Path) -> list[str]:
    """``command`` with its output file (``-o FILE`` or ``--descriptor_set_out=FILE``,
    cardrules.binpb in the docs) replaced by ``output``, so the test writes no file into
    the checkout."""
    replaced = list(command)
    for index, argument in enumerate(command):
        if argument == "-o":
            replaced[index + 1] = str(output)
        elif argument.startswith("--descriptor_set_out="):
            replaced[index] = f"--descriptor_set_out={output}"
    assert "cardrules.binpb" not in replaced and str(output) in " ".join(replaced), command
    return replaced


def run(command: list[str]) -> None:
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def built_with_buf(output: Path) -> Path:
    command = documented_command("buf")
    assert command[0] == "node_modules/.bin/buf", command
    assert BUF.exists(), f"{BUF} is missing: run `npm ci` (make test does)"
    run(writing_to(command, output))
    return output


def built_with_protoc(command: list[str], output: Path) -> Path:
    """``command``, a protoc command line, run by grpcio-tools' protoc."""
    assert command[0] == "protoc", command
    run([sys.executable, "-m", "grpc_tools.protoc", *writing_to(command, output)[1:]])
    return output


def pool_of(descriptor_set: Path) -> descriptor_pool.DescriptorPool:
    """A pool of the set's files alone, as the transcoder builds it: each file's imports
    must come before it in the set."""
    files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set.read_bytes()).file
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        pool.Add(file)
    return pool


@pytest.fixture(scope="module", params=["buf", "protoc"])
def documented_set(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> descriptor_pool.DescriptorPool:
    output = tmp_path_factory.mktemp(request.param) / "cardrules.binpb"
    if request.param == "buf":
        return pool_of(built_with_buf(output))
    return pool_of(built_with_protoc(documented_command("protoc"), output))


def test_the_documented_set_holds_the_service_and_the_status_types(documented_set):
    method_names = {method.name for method in documented_set.FindServiceByName(SERVICE).methods}
    assert method_names == {"NewGame", "LegalMoves", "Play", "Score", "GetView"}
    for name in STATUS_TYPES:
        assert documented_set.FindMessageTypeByName(name).full_name == name


def test_protoc_over_the_service_proto_alone_lacks_the_status_types(tmp_path):
    """Why the docs name the google/rpc files: without them the set has the service but
    none of the trailer's types."""
    protoc = documented_command("protoc")
    alone = [
        argument
        for argument in protoc
        if not argument.endswith(("status.proto", "error_details.proto"))
    ]
    assert len(alone) == len(protoc) - 2, protoc
    pool = pool_of(built_with_protoc(alone, tmp_path / "alone.binpb"))
    assert pool.FindServiceByName(SERVICE).full_name == SERVICE
    for name in STATUS_TYPES:
        with pytest.raises(KeyError):
            pool.FindMessageTypeByName(name)


def transcoded_refusal(pool: descriptor_pool.DescriptorPool, error: grpc.RpcError) -> object:
    """The JSON body the transcoder's ``convert_grpc_status`` makes of a gRPC refusal:
    its ``grpc-status-details-bin`` trailer read and printed with the set's types alone."""
    trailers: Any = error.trailing_metadata()  # typed by grpc's stubs as opaque
    (trailer,) = [value for key, value in trailers if key == "grpc-status-details-bin"]
    assert isinstance(trailer, bytes)
    status = GetMessageClass(pool.FindMessageTypeByName("google.rpc.Status")).FromString(trailer)
    return json_format.MessageToDict(status, descriptor_pool=pool)


def test_a_refusal_through_the_documented_set_is_the_gateways_body(
    documented_set, server: ServerProcess, stub: Stub
):
    """The body a transcoder with ``convert_grpc_status`` sends is the one this gateway
    sends for the same request: same code, message, ErrorInfo and BadRequest."""
    request = json_format.ParseDict(MALFORMED, pb.LegalMovesRequest())
    with pytest.raises(grpc.RpcError) as refused:
        stub.LegalMoves(request, timeout=TIMEOUT)
    transcoded = transcoded_refusal(documented_set, refused.value)
    url = f"{server.http_url}/v1/krypkasino:legalMoves"
    status, _, body = exchange(url, json.dumps(MALFORMED).encode())
    assert status == 400
    assert transcoded == body
    details = {detail["@type"].rsplit("/", 1)[1]: detail for detail in body["details"]}
    assert set(details) == {"google.rpc.ErrorInfo", "google.rpc.BadRequest"}
    assert details["google.rpc.ErrorInfo"]["reason"] == "TOKEN_MALFORMED"
