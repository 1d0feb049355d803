"""A call's W3C ``traceparent`` in its log lines (design section 6; docs/operations.md,
"Log lines"): the trace-id of a valid one as ``trace_id`` and its parent-id (the
caller's span) as ``parent_id``, over gRPC and HTTP; neither field, and no refusal, for
none or an invalid one; never echoed.

The values are those of W3C Trace Context Level 1, section 3.2, and of the W3C test
suite (w3c/trace-context, test/test.py), written out here."""

from __future__ import annotations

import http.client
import json
import logging
import uuid
from collections.abc import Iterator

import grpc
import pytest
import structlog
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from service.calls import CallInfo, CallRunner
from service.grpc_service import call_headers
from service.logs import configure_logging, request_log_fields
from service.trace_context import DUPLICATE, Trace, trace_from
from tests.service.grpc_helpers import Stub
from tests.service.http_helpers import exchange
from tests.service.server_process import ServerProcess

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
VALID = f"00-{TRACE}-{PARENT}-01"  # the specification's own example
TRACED = Trace(TRACE, PARENT)

SUITE_TRACE = "12345678901234567890123456789012"
SUITE_PARENT = "1234567890123456"
SUITE_TRACED = Trace(SUITE_TRACE, SUITE_PARENT)


def _suite(version: str = "00", trace: str = SUITE_TRACE, parent: str = SUITE_PARENT) -> str:
    return f"{version}-{trace}-{parent}-01"


VALID_VALUES = {
    "spec_example": (VALID, TRACED),
    "spec_example_not_sampled": (f"00-{TRACE}-{PARENT}-00", TRACED),
    "any_flags": (f"00-{TRACE}-{PARENT}-ff", TRACED),
    "future_version": (_suite("cc"), SUITE_TRACED),
    "future_version_with_more": (f"{_suite('cc')}-what-the-future-will-be-like", SUITE_TRACED),
    # What follows the dash may be nothing: a parser reads the 55 characters it knows
    # and checks that a "-" follows (section 3.2.4).
    "future_version_with_a_dash_alone": (f"{_suite('cc')}-", SUITE_TRACED),
    # HTTP's optional white space around a value is no part of it (test_traceparent_ows_handling).
    "leading_space": (f" {VALID}", TRACED),
    "leading_tab": (f"\t{VALID}", TRACED),
    "trailing_space": (f"{VALID} ", TRACED),
    "trailing_tab": (f"{VALID}\t", TRACED),
    "both_sides": (f"\t {VALID} \t", TRACED),
}

INVALID_VALUES = {
    "empty": "",
    "duplicate": DUPLICATE,
    "garbage": "asdf",
    # A comma is no white space: what a proxy makes of an empty header joined to a value.
    "trailing_comma": f"00-{TRACE}-{PARENT}-01,",
    "leading_comma_and_space": f", 00-{TRACE}-{PARENT}-01",
    # Lowercase hex only (HEXDIGLC).
    "uppercase_trace_id": f"00-{TRACE.upper()}-{PARENT}-01",
    "uppercase_parent_id": f"00-{TRACE}-{PARENT.upper()}-01",
    "uppercase_version": f"0A-{TRACE}-{PARENT}-01",
    "uppercase_flags": f"00-{TRACE}-{PARENT}-0A",
    # All zeros is no id.
    "trace_id_all_zero": _suite(trace="0" * 32),
    "parent_id_all_zero": _suite(parent="0" * 16),
    "version_ff": _suite("ff"),
    # Version 00 ends at its flags.
    "version_00_trailing_dot": f"{_suite()}.",
    "version_00_with_more": f"{_suite()}-what-the-future-will-be-like",
    "future_version_not_dash": f"{_suite('cc')}.what-the-future-will-be-like",
    # Illegal characters.
    "version_leading_dot": _suite(".0"),
    "version_trailing_dot": _suite("0."),
    "trace_id_leading_dot": _suite(trace="." + SUITE_TRACE[1:]),
    "trace_id_trailing_dot": _suite(trace=SUITE_TRACE[:-1] + "."),
    "parent_id_leading_dot": _suite(parent="." + SUITE_PARENT[1:]),
    "parent_id_trailing_dot": _suite(parent=SUITE_PARENT[:-1] + "."),
    "flags_leading_dot": f"00-{SUITE_TRACE}-{SUITE_PARENT}-.0",
    "flags_trailing_dot": f"00-{SUITE_TRACE}-{SUITE_PARENT}-0.",
    # Wrong lengths.
    "version_too_long": _suite("000"),
    "version_much_too_long": _suite("0000"),
    "version_too_short": _suite("0"),
    "trace_id_too_long": _suite(trace=SUITE_TRACE + "3"),
    "trace_id_too_short": _suite(trace=SUITE_TRACE[:-1]),
    "parent_id_too_long": _suite(parent=SUITE_PARENT + "7"),
    "parent_id_too_short": _suite(parent=SUITE_PARENT[:-1]),
    "flags_too_long": f"00-{SUITE_TRACE}-{SUITE_PARENT}-001",
    "flags_too_short": f"00-{SUITE_TRACE}-{SUITE_PARENT}-1",
    "no_flags": f"00-{SUITE_TRACE}-{SUITE_PARENT}",
    "future_version_too_short": f"cc-{SUITE_TRACE}-{SUITE_PARENT}-1",
    # White space inside the value, or other than space and tab around it.
    "space_inside": f"00-{TRACE} -{PARENT}-01",
    "space_for_dash": f"00 {TRACE}-{PARENT}-01",
    "newline_after": f"{VALID}\n",
    "two_values_joined": f"{VALID},{_suite()}",
}


@pytest.mark.parametrize(("value", "trace"), VALID_VALUES.values(), ids=VALID_VALUES.keys())
def test_a_valid_traceparent_gives_its_trace_id_and_parent_id(value: str, trace: Trace) -> None:
    assert trace_from(value) == trace


@pytest.mark.parametrize("value", INVALID_VALUES.values(), ids=INVALID_VALUES.keys())
def test_an_invalid_traceparent_gives_no_trace(value: str) -> None:
    assert trace_from(value) is None


def test_no_traceparent_gives_no_trace() -> None:
    assert trace_from(None) is None


@pytest.mark.parametrize(
    ("metadata", "trace"),
    [
        ((), None),
        ((("traceparent", VALID),), TRACED),
        (
            (("x-request-id", "r"), ("traceparent", VALID), ("grpc-previous-rpc-attempts", "1")),
            TRACED,
        ),
        ((("traceparent", VALID.upper()),), None),
        # Two are invalid however valid each is (the W3C suite's test_traceparent_duplicated).
        ((("traceparent", VALID), ("traceparent", VALID)), None),
        ((("traceparent", "junk"), ("traceparent", VALID)), None),
        # gRPC gives bytes only for -bin keys; never a trace here.
        ((("traceparent", VALID.encode()),), None),
    ],
    ids=["none", "valid", "among_others", "invalid", "twice", "invalid_then_valid", "bytes"],
)
def test_the_trace_is_read_from_the_metadata_in_the_same_pass(
    metadata: tuple[tuple[str, str | bytes], ...], trace: Trace | None
) -> None:
    request_id = "r" if metadata and metadata[0][0] == "x-request-id" else None
    attempt = 2 if any(key == "grpc-previous-rpc-attempts" for key, _ in metadata) else 1
    assert call_headers(metadata) == (request_id, attempt, trace)


def test_the_request_fields_carry_a_trace_id_and_parent_id_only_when_there_is_a_trace() -> None:
    """As ``peer``: absent rather than ``null``, so lines without a trace stay as they were;
    the two last, in that order (the trace before the span in it)."""

    def fields(trace: Trace | None) -> dict[str, object]:
        return request_log_fields(
            request_id="r",
            method="svc.S/M",
            code="OK",
            duration_ms=1.0,
            game_id=None,
            transport="grpc",
            trace=trace,
        )

    untraced = fields(None)
    assert "trace_id" not in untraced and "parent_id" not in untraced
    traced = fields(TRACED)
    assert list(traced) == [*untraced, "trace_id", "parent_id"]
    assert (traced["trace_id"], traced["parent_id"]) == (TRACE, PARENT)


@pytest.fixture
def json_logs() -> Iterator[None]:
    """JSON log lines for one test; the process-wide logging put back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    configure_logging("json")
    yield
    structlog.reset_defaults()
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)


@pytest.mark.usefixtures("json_logs")
def test_a_handler_bugs_error_line_and_request_line_carry_the_trace_id_and_parent_id(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Both lines of a call failed by a bug can be found from its trace."""

    def broken(request: str, info: CallInfo) -> str:
        raise RuntimeError("a bug")

    def answer(request: str, info: CallInfo) -> str:
        return request

    runner = CallRunner(None)
    runner.run("svc.S", "Broken", "grpc", "rid-1", broken, "x", trace=TRACED)
    runner.run("svc.S", "Broken", "grpc", "rid-2", broken, "x")
    runner.run("svc.S", "Ok", "http", "rid-3", answer, "x", trace=SUITE_TRACED)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [
        (line["event"], line["request_id"], line.get("trace_id"), line.get("parent_id"))
        for line in lines
    ] == [
        ("unhandled error", "rid-1", TRACE, PARENT),
        ("request", "rid-1", TRACE, PARENT),
        ("unhandled error", "rid-2", None, None),
        ("request", "rid-2", None, None),
        ("request", "rid-3", SUITE_TRACE, SUITE_PARENT),
    ]
    assert not {"trace_id", "parent_id"} & (set(lines[2]) | set(lines[3]))


# -- a real server ------------------------------------------------------------------------


def _grpc_traced(
    server: ServerProcess, stub: Stub, sent: tuple[tuple[str, str], ...]
) -> dict[str, object]:
    """A ``NewGame`` over gRPC with ``sent`` metadata: its request line, once answered OK and
    with nothing of ``traceparent`` in its answer's metadata."""
    request_id = f"trace-grpc-{uuid.uuid4().hex}"
    _, call = stub.NewGame.with_call(
        pb.NewGameRequest(config=pb.GameConfig(players=2)),
        metadata=(("x-request-id", request_id), *sent),
        timeout=10,
    )
    assert call.code() is grpc.StatusCode.OK
    answered = (*call.initial_metadata(), *call.trailing_metadata())
    assert "traceparent" not in {key for key, _ in answered}
    (line,) = server.request_lines(request_id)
    assert line["code"] == "OK" and line["transport"] == "grpc"
    return line


def test_a_grpc_calls_request_line_carries_its_trace_id_and_parent_id(
    server: ServerProcess, stub: Stub
) -> None:
    line = _grpc_traced(server, stub, (("traceparent", VALID),))
    assert (line["trace_id"], line["parent_id"]) == TRACED
    future = _grpc_traced(server, stub, (("traceparent", f"{_suite('cc')}-more"),))
    assert (future["trace_id"], future["parent_id"]) == SUITE_TRACED


def _one_trace_two_spans() -> tuple[str, str, str]:
    """A new trace-id and two client spans of it: two calls a backend makes in one trace."""
    return uuid.uuid4().hex, "1111111111111111", "2222222222222222"


def test_two_grpc_calls_of_one_trace_are_told_apart_by_their_parent_ids(
    server: ServerProcess, stub: Stub
) -> None:
    """W3C Trace Context 3.2.2.4: the parent-id is the call as its caller knows it, so a
    client span joins its one server line; the trace-id alone finds both."""
    trace, first, second = _one_trace_two_spans()
    lines = [
        _grpc_traced(server, stub, (("traceparent", f"00-{trace}-{span}-01"),))
        for span in (first, second)
    ]
    assert [(line["trace_id"], line["parent_id"]) for line in lines] == [
        (trace, first),
        (trace, second),
    ]


@pytest.mark.parametrize(
    "sent",
    [
        (),
        (("traceparent", VALID.upper()),),
        (("traceparent", _suite("ff")),),
        (("traceparent", _suite(trace="0" * 32)),),
        (("traceparent", f"{VALID}-more"),),
    ],
    ids=["absent", "uppercase", "version_ff", "trace_id_all_zero", "version_00_with_more"],
)
def test_a_grpc_call_without_a_valid_traceparent_is_served_and_logged_without_trace_id_or_parent_id(
    server: ServerProcess, stub: Stub, sent: tuple[tuple[str, str], ...]
) -> None:
    """Not "twice" as over HTTP: grpc (1.85) knows ``traceparent`` and hands the service
    one value of the key, the last sent, so two never reach ``call_headers`` over gRPC."""
    line = _grpc_traced(server, stub, sent)
    assert "trace_id" not in line and "parent_id" not in line


def _http_traced(
    server: ServerProcess, *traceparents: str, path: str = "newGame"
) -> dict[str, object]:
    """A POST to ``/v1/krypkasino:{path}`` with each of ``traceparents`` as a header of its
    own (urllib sends one of a name): its request line, with nothing of ``traceparent`` in
    the answer's headers."""
    request_id = f"trace-http-{uuid.uuid4().hex}"
    body = b'{"config": {"players": 2}}'
    connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    try:
        connection.putrequest("POST", f"/v1/krypkasino:{path}")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(len(body)))
        connection.putheader("X-Request-Id", request_id)
        for value in traceparents:
            connection.putheader("Traceparent", value)
        connection.endheaders(body)
        answer = connection.getresponse()
        answer.read()
    finally:
        connection.close()
    assert answer.status == (200 if path == "newGame" else 404)
    assert answer.getheader("X-Request-Id") == request_id
    assert "traceparent" not in {name.lower() for name in answer.headers}
    (line,) = server.request_lines(request_id)
    assert line["transport"] == "http"
    return line


def test_an_http_calls_request_line_carries_its_trace_id_and_parent_id(
    server: ServerProcess,
) -> None:
    line = _http_traced(server, VALID)
    assert (line["trace_id"], line["parent_id"]) == TRACED
    # A request on no route is logged too, and as traceable.
    unrouted = _http_traced(server, VALID, path="nowhere")
    assert (unrouted["trace_id"], unrouted["parent_id"]) == TRACED


def test_two_http_calls_of_one_trace_are_told_apart_by_their_parent_ids(
    server: ServerProcess,
) -> None:
    trace, first, second = _one_trace_two_spans()
    lines = [_http_traced(server, f"00-{trace}-{span}-01") for span in (first, second)]
    assert [(line["trace_id"], line["parent_id"]) for line in lines] == [
        (trace, first),
        (trace, second),
    ]


def test_the_header_name_is_case_insensitive_over_http(server: ServerProcess) -> None:
    """The W3C suite's test_traceparent_header_name_valid_casing."""
    request_id = f"trace-http-{uuid.uuid4().hex}"
    status, headers, _ = exchange(
        f"{server.http_url}/v1/krypkasino:newGame",
        b'{"config": {"players": 2}}',
        headers={
            "Content-Type": "application/json",
            "X-Request-Id": request_id,
            "TRACEPARENT": VALID,
        },
    )
    assert status == 200 and "traceparent" not in {name.lower() for name in headers}
    (line,) = server.request_lines(request_id)
    assert (line["trace_id"], line["parent_id"]) == TRACED


@pytest.mark.parametrize(
    "sent",
    [(), (VALID.upper(),), (_suite("ff"),), (_suite(parent="0" * 16),), (VALID, VALID)],
    ids=["absent", "uppercase", "version_ff", "parent_id_all_zero", "twice"],
)
def test_an_http_call_without_a_valid_traceparent_is_served_and_logged_without_trace_id_or_parent_id(
    server: ServerProcess, sent: tuple[str, ...]
) -> None:
    line = _http_traced(server, *sent)
    assert "trace_id" not in line and "parent_id" not in line
