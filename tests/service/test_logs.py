"""structlog setup (design section 6): JSON lines, console, levels, and no secrets ever."""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import enum
import io
import itertools
import json
import logging
import os
import pathlib
import re
import subprocess
import sys
import time
import types
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, cast

import orjson
import pytest
import structlog
import structlog.testing
from aiohttp.http_exceptions import BadHttpMessage
from aiohttp.web import RequestPayloadError
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from grpc._cython.cygrpc import ExecuteBatchError  # type: ignore[import-not-found]
from prometheus_client import CollectorRegistry

import service.log_redaction
import service.logs
from service.calls import CallInfo, CallRunner
from service.cli import build_parser
from service.errors import invalid_argument
from service.log_redaction import REDACTED_KEYS
from service.logs import (
    DroppedLines,
    bind_process_fields,
    configure_logging,
    get_logger,
    request_log_fields,
    status_or_crash,
    utc_timestamp,
)
from service.metrics import ServiceMetrics

SECRET = "S3CRET-VALUE-7f3a"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """configure_logging changes process-wide state; put it back after each test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)


def json_lines(text: str) -> list[dict[str, object]]:
    lines = text.splitlines()
    assert lines, "nothing was logged"
    return [json.loads(line) for line in lines]


def test_json_lines_carry_the_request_fields(capsys):
    configure_logging("json")
    fields = request_log_fields(
        request_id="req-1",
        method="/cardrules.krypkasino.v1.KrypkasinoService/Play",
        code="FailedPrecondition",
        duration_ms=0.4567891,
        game_id="g-42",
        transport="grpc",
        peer="ipv4:127.0.0.1:5555",
    )
    get_logger("cardrules.calls").info("request", **fields)
    get_logger().info("second", n=2)
    first, second = json_lines(capsys.readouterr().out)
    assert list(first)[:3] == ["timestamp", "level", "event"]
    assert first["event"] == "request"
    assert first["level"] == "info"
    assert first["logger"] == "cardrules.calls"
    assert first["request_id"] == "req-1"
    assert first["method"] == "/cardrules.krypkasino.v1.KrypkasinoService/Play"
    assert first["code"] == "FailedPrecondition"
    assert first["duration_ms"] == 0.457
    assert first["game_id"] == "g-42"
    assert first["transport"] == "grpc"
    assert first["peer"] == "ipv4:127.0.0.1:5555"
    timestamp = first["timestamp"]
    assert isinstance(timestamp, str) and timestamp.endswith("Z") and "T" in timestamp
    assert second["event"] == "second" and second["n"] == 2 and "logger" not in second


def test_request_fields_always_have_game_id_and_peer_only_when_known():
    fields = request_log_fields(
        request_id="r", method="m", code="OK", duration_ms=1, game_id=None, transport="http"
    )
    assert fields == {
        "request_id": "r",
        "method": "m",
        "code": "OK",
        "duration_ms": 1,
        "game_id": None,
        "transport": "http",
    }


def test_request_fields_place_the_call_in_its_game_after_game_id():
    """``seat``, ``move_number``, ``state_id``, ``deal_source`` and ``draw_given`` only
    when known (docs/operations.md, "Log lines"), between ``game_id`` and ``transport``;
    a seat of 0, move 0 and a draw not given are known, not absent."""
    fields = request_log_fields(
        request_id="r",
        method="m",
        code="OK",
        duration_ms=1,
        game_id="g",
        transport="grpc",
        seat=0,
        move_number=0,
        state_id="0123456789abcdef",
        deal_source="seed",
        draw_given=False,
    )
    assert list(fields) == [
        "request_id",
        "method",
        "code",
        "duration_ms",
        "game_id",
        "seat",
        "move_number",
        "state_id",
        "deal_source",
        "draw_given",
        "transport",
    ]
    assert (fields["seat"], fields["move_number"], fields["draw_given"]) == (0, 0, False)


def test_redacted_keys_cover_the_design_secrets():
    assert {"state", "state_token", "seat_token", "seat_tokens", "hand", "hands", "stock"} <= (
        REDACTED_KEYS
    )
    assert {"token", "key", "keys"} <= REDACTED_KEYS


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_secrets_never_reach_the_output(capsys, fmt):
    configure_logging(fmt)
    log = get_logger("leak")
    log.info(
        "oops",
        state=SECRET.encode(),
        seat_token=SECRET,
        seat_tokens=[SECRET, SECRET],
        hand=[SECRET, 7, 12],
        Hands={0: [SECRET]},
        stock=(SECRET,),
        key=SECRET,
        state_keys=[SECRET],
        other_token=SECRET,
        # One key for each secret ending (_REDACTED_SUFFIXES).
        dealer_hand=[SECRET],
        seat_hands=[[SECRET]],
        api_key=SECRET,
        signing_keys=[SECRET],
        client_secret=SECRET,
        refresh_tokens=[SECRET],
        nested={"inner": {"seat_token": SECRET, "visible": "yes"}},
        raw=SECRET.encode(),
        buffer=bytearray(SECRET.encode()),
        message=pb.PlayRequest(state=SECRET.encode()),
        as_list=[{"hand": SECRET}],
    )
    structlog.contextvars.bind_contextvars(seat_token=SECRET)
    log.warning("bound via contextvars")
    out = capsys.readouterr().out
    assert "oops" in out and "bound via contextvars" in out
    assert "yes" in out  # non-secret nested values survive
    assert SECRET not in out
    assert SECRET.encode().hex() not in out


def test_what_is_nested_too_deep_to_scrub_is_hidden_whole(capsys):
    configure_logging("json")
    deep: dict[str, object] = {"seat_token": SECRET, "raw": SECRET.encode(), "visible": "yes"}
    for _ in range(10):
        deep = {"level": deep, "plain": "shown"}
    get_logger("leak").info("deep", nested=deep)
    out = capsys.readouterr().out
    assert SECRET not in out and "dict nested too deep" in out and "shown" in out


def test_every_container_is_scrubbed_down_to_eight_levels(capsys):
    """Mappings, tuples and lists are each looked through, a level per container: bytes
    in a tuple are hidden as anywhere else, and the container at depth 8 is the first
    shown as its type only."""
    configure_logging("json")

    def chain(bottom: object) -> object:
        """``bottom`` at depth 8 under a dict, a tuple and a list in turn."""
        for depth in reversed(range(8)):
            bottom = ({"level": bottom}, (bottom,), [bottom])[depth % 3]
        return bottom

    def as_json(value: object) -> object:
        return json.loads(json.dumps(value))

    get_logger().info(
        "nested",
        nested=chain(["bottom"]),
        plain=chain("shown"),
        pair=(SECRET.encode(), {"seat_token": SECRET}),
    )
    (line,) = json_lines(capsys.readouterr().out)
    assert line["nested"] == as_json(chain("[REDACTED] list nested too deep"))
    assert line["plain"] == as_json(chain("shown"))
    assert line["pair"] == [f"[REDACTED] {len(SECRET)} bytes", {"seat_token": "[REDACTED]"}]


def test_json_redaction_says_what_was_hidden(capsys):
    configure_logging("json")
    get_logger().info("x", seat_token=SECRET, raw=b"\x00" * 5, message=pb.PlayRequest())
    (line,) = json_lines(capsys.readouterr().out)
    assert line["seat_token"] == "[REDACTED]"
    assert line["raw"] == "[REDACTED] 5 bytes"
    assert line["message"] == "[REDACTED] PlayRequest"


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_tracebacks_show_no_locals(capsys, fmt):
    configure_logging(fmt)

    # Innocent names: only the traceback settings, not the key rules, can hide these.
    def handler(payload: str) -> None:
        cards = [SECRET]
        raise RuntimeError(f"bad card count {len(cards)} for {len(payload)}")

    try:
        handler(SECRET)
    except RuntimeError:
        get_logger().exception("handler failed")
    out = capsys.readouterr().out
    assert "handler failed" in out and "RuntimeError" in out and "bad card count 1" in out
    assert SECRET not in out


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_a_bugs_exception_holding_a_token_or_a_request_shows_neither(capsys, fmt):
    """Design section 6: a bug's exception may hold what it failed on as its arguments (a
    dict lookup by token raises ``KeyError(token)``), and its text would quote it; so
    would the exceptions it was raised from. Bytes and messages are hidden there too."""
    configure_logging(fmt)
    token = SECRET.encode()

    known: dict[bytes, int] = {}

    def lookup(request: pb.PlayRequest, info: CallInfo) -> None:
        try:
            known[request.state]  # the bug: a lookup by token
        except KeyError as error:
            raise ValueError("cannot play", request) from error

    def grouped(request: pb.PlayRequest, info: CallInfo) -> None:
        raise ExceptionGroup("calls failed", [KeyError(request.seat_token)])

    runner = CallRunner(None)
    for bug in (lookup, grouped):
        runner.run("svc.S", "Play", "grpc", "rid-1", bug, pb.PlayRequest(state=token))
        out = capsys.readouterr().out
        assert "unhandled error" in out and "Internal" in out
        assert SECRET not in out and SECRET.encode().hex() not in out
        assert "[REDACTED]" in out
    # A chain that loops back through a secret, or is too long to look through whole,
    # is cut where it was not looked through, never shown unscrubbed or not at all.
    looped = ValueError("outer")
    inner = KeyError(token)
    looped.__context__, inner.__context__ = inner, looped
    long = RuntimeError("first")
    long.__context__ = KeyError(token)  # the deepest one holds the secret
    for number in range(3000):
        link = RuntimeError(f"link {number}")
        link.__context__, long = long, link
    for error in (looped, long):
        try:
            raise error
        except Exception:
            get_logger().exception("chained")
        out = capsys.readouterr().out
        assert "chained" in out and SECRET not in out
    # What holds no secret is logged as it was, with its type and text.
    try:
        raise KeyError("seat 7")
    except KeyError:
        get_logger().exception("lookup failed")
    out = capsys.readouterr().out
    assert "KeyError" in out and "seat 7" in out and "REDACTED" not in out


def test_level_filtering(capsys):
    configure_logging("json", "warning")
    log = get_logger()
    log.debug("d")
    log.info("i")
    log.warning("w")
    log.error("e")
    assert [line["event"] for line in json_lines(capsys.readouterr().out)] == ["w", "e"]

    configure_logging("json", "DEBUG")
    log.debug("d2")  # a logger made before the reconfiguration follows it
    assert [line["event"] for line in json_lines(capsys.readouterr().out)] == ["d2"]


def test_reconfiguring_is_idempotent(capsys):
    configure_logging("json")
    configure_logging("json")
    get_logger().info("once")
    logging.getLogger("lib").warning("stdlib once")
    assert [line["event"] for line in json_lines(capsys.readouterr().out)] == [
        "once",
        "stdlib once",
    ]


def test_stdlib_records_become_redacted_json(capsys):
    configure_logging("json", "info")
    lib = logging.getLogger("grpc._cython.cygrpc")
    lib.info("value %d", 42, extra={"seat_token": SECRET})
    lib.debug("filtered")
    (line,) = json_lines(capsys.readouterr().out)
    assert line["event"] == "value 42"
    assert line["level"] == "info"
    assert line["logger"] == "grpc._cython.cygrpc"
    assert line["seat_token"] == "[REDACTED]"


def test_console_mode_renders_for_humans(capsys):
    configure_logging("console", "debug")
    get_logger("cardrules.server").debug("listening", port=50051)
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1
    assert "listening" in out and "port=50051" in out and "debug" in out
    assert "cardrules.server" in out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)
    assert "\x1b[" not in out  # no colours when stdout is not a terminal


def test_auto_is_json_when_stdout_is_not_a_terminal(capsys):
    configure_logging("auto")
    get_logger().info("piped")
    (line,) = json_lines(capsys.readouterr().out)
    assert line["event"] == "piped"


def test_auto_is_console_on_a_terminal(monkeypatch):
    # A terminal that asks for no colours is tested in test_terminal_output.py.
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    controller, terminal = os.openpty()
    with os.fdopen(terminal, "w") as tty:
        monkeypatch.setattr(sys, "stdout", tty)
        configure_logging("auto")
        get_logger().info("on a tty", answer=42)
        tty.flush()
        monkeypatch.undo()
    try:
        out = os.read(controller, 65536).decode()
    finally:
        os.close(controller)
    assert "on a tty" in out and "answer" in out and "42" in out
    assert not out.lstrip().startswith("{")
    assert "\x1b[" in out  # colours on a terminal


@pytest.mark.parametrize(("fmt", "level"), [("xml", "info"), ("json", "verbose")])
def test_bad_settings_are_refused(fmt, level):
    with pytest.raises(ValueError):
        configure_logging(fmt, level)


# -- the fast JSON path: same lines, cheaper ---------------------------------


def test_timestamps_are_what_datetime_isoformat_writes():
    """RFC 3339 UTC, microseconds truncated, always six of them (``isoformat``'s own
    omits a zero fraction, which strict parsers refuse), ``Z``."""

    def iso(ns: int) -> str:
        when = datetime.fromtimestamp(ns // 10**9, UTC).replace(microsecond=ns // 1000 % 10**6)
        return when.isoformat(timespec="microseconds").replace("+00:00", "Z")

    moments = [
        1_780_000_000_123_456_789,
        1_780_000_000_999_999_999,  # truncated, not rounded up into the next second
        1_780_000_001_000_000_000,  # a new second, and no fraction at all
        1_780_000_001_000_000_999,
        1_780_000_000_000_001_000,  # back into a second seen before (the clock may step back)
        951_782_400_500_000_000,  # 2000-02-29
    ]
    for ns in moments:
        assert utc_timestamp(itertools.repeat(ns).__next__) == iso(ns)
    assert utc_timestamp(lambda: 1_780_000_000_123_456_789) == "2026-05-28T20:26:40.123456Z"
    # Under a microsecond past the second: one line in a million had no fraction at all.
    assert utc_timestamp(lambda: 1_796_549_482_000_000_999) == "2026-12-06T09:31:22.000000Z"
    live = utc_timestamp()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", live)
    assert datetime.fromisoformat(live).tzinfo == UTC


def test_json_line_timestamp_has_the_same_form(capsys):
    configure_logging("json")
    get_logger().info("stamped")
    (line,) = json_lines(capsys.readouterr().out)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z", str(line["timestamp"]))


def test_json_key_order_and_level_aliases(capsys):
    """Leading keys, then the caller's in order, then context, logger; structlog's level names."""
    configure_logging("json", "debug")
    log = get_logger("order")
    structlog.contextvars.bind_contextvars(bound_id="b-1", zeta=0)
    log.info("first", zeta=1, alpha=2, level="spoofed", timestamp="spoofed", logger="spoofed")
    log.warn("warned")
    log.fatal("fatal")
    log.msg("message")
    log.debug("%s and %d", "interpolated", 2)
    log.info("%(who)s named", {"who": "mapping"})
    lines = [
        json.loads(line, object_pairs_hook=list) for line in capsys.readouterr().out.splitlines()
    ]
    first = [key for key, _ in lines[0]]
    assert first == ["timestamp", "level", "event", "zeta", "alpha", "logger", "bound_id"]
    assert dict(lines[0])["zeta"] == 1  # the call's value wins over the context's
    assert dict(lines[0])["level"] == "info" and dict(lines[0])["logger"] == "order"
    assert dict(lines[0])["timestamp"] != "spoofed"
    assert [(dict(line)["level"], dict(line)["event"]) for line in lines[1:]] == [
        ("warning", "warned"),
        ("critical", "fatal"),
        ("info", "message"),
        ("debug", "interpolated and 2"),
        ("info", "mapping named"),
    ]


def test_exceptions_and_stacks_in_json(capsys):
    configure_logging("json")
    log = get_logger()
    try:
        raise KeyError("missing")
    except KeyError:
        log.exception("failed", attempt=1)
    log.info("where", stack_info=True)
    failed, where = json_lines(capsys.readouterr().out)
    assert failed["level"] == "error" and failed["attempt"] == 1 and "exc_info" not in failed
    assert (
        isinstance(failed["exception"], list) and failed["exception"][0]["exc_type"] == "KeyError"
    )
    # The stack ends at the caller, not inside the logging code.
    stack = str(where["stack"]).splitlines()
    assert stack[-2].endswith(", in test_exceptions_and_stacks_in_json")
    assert "service/logs.py" not in "\n".join(stack)


def test_values_orjson_refuses_still_log(capsys):
    configure_logging("json")
    get_logger().info(
        "odd values",
        big=10**30,
        lone_surrogate="\udc80",
        numbered={1: "one"},
        text="žluťoučký ♠",
        obj=object(),
        when=datetime(2020, 1, 2, tzinfo=UTC),
        protocol=_Custom(),
    )
    (line,) = json_lines(capsys.readouterr().out)
    assert line["big"] == 10**30
    assert line["lone_surrogate"] == "\udc80"
    assert line["numbered"] == {"1": "one"}
    assert line["text"] == "žluťoučký ♠"
    assert str(line["obj"]).startswith("<object object at")
    assert line["when"] == repr(datetime(2020, 1, 2, tzinfo=UTC))  # as json.dumps's default did
    assert line["protocol"] == {"custom": True}


@dataclasses.dataclass
class _Point:
    x: int


@dataclasses.dataclass
class _Carrier:
    raw: bytes
    seat_token: str


def test_datetimes_are_logged_as_their_repr_and_dataclasses_as_their_fields(capsys):
    """A datetime as json.dumps's default did, also when orjson could write the rest of
    the line; a dataclass as the mapping of its fields, scrubbed like any mapping (its
    ``repr`` would show the bytes it holds)."""
    configure_logging("json")
    when = datetime(2020, 1, 2, tzinfo=UTC)
    get_logger().info("values", when=when, point=_Point(3), carrier=_Carrier(b"tok", "tok"))
    (line,) = json_lines(capsys.readouterr().out)
    assert (line["when"], line["point"]) == (repr(when), {"x": 3})
    assert line["carrier"] == {"raw": "[REDACTED] 3 bytes", "seat_token": "[REDACTED]"}


class _Custom:
    def __structlog__(self) -> dict[str, bool]:
        return {"custom": True}


def test_json_lines_go_to_the_binary_buffer_after_pending_text(monkeypatch):
    """One write of bytes per line; text already written to stdout stays first."""
    raw = io.BytesIO()
    stdout = io.TextIOWrapper(raw, encoding="utf-8")  # not write_through: text waits
    monkeypatch.setattr(sys, "stdout", stdout)
    configure_logging("json")
    stdout.write("plain text first\n")
    get_logger().info("then the line", text="♠")
    logging.getLogger("lib").warning("then a record")
    text, line, record = raw.getvalue().decode().splitlines()
    assert text == "plain text first"
    assert json.loads(line)["event"] == "then the line" and json.loads(line)["text"] == "♠"
    assert json.loads(record)["event"] == "then a record"


def test_json_lines_on_a_text_only_stdout(monkeypatch):
    stdout = io.StringIO()  # no .buffer
    monkeypatch.setattr(sys, "stdout", stdout)
    configure_logging("json")
    get_logger().info("text only", text="♠")
    (line,) = json_lines(stdout.getvalue())
    assert line["event"] == "text only" and line["text"] == "♠"


def test_json_lines_are_compact_utf8_whatever_the_encoding_of_stdouts_text(monkeypatch):
    """orjson's bytes go to stdout's buffer as they are: compact, UTF-8 even where the
    text layer is ASCII (``PYTHONIOENCODING``), never ``\\u`` escapes."""
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii"))
    configure_logging("json")
    get_logger().info("spades", text="♠")
    logging.getLogger("lib").warning("ascii record")
    line, record = raw.getvalue().splitlines()
    assert '"text":"♠"'.encode() in line
    assert line == orjson.dumps(json.loads(line))
    assert json.loads(record)["event"] == "ascii record"


class _TextOnly:
    """A stdout with no binary buffer that keeps what is written and when it is flushed."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def write(self, text: str) -> int:
        self.calls.append(("write", text))
        return len(text)

    def flush(self) -> None:
        self.calls.append(("flush",))


def test_each_json_line_on_a_text_only_stdout_is_one_write_then_flushed(monkeypatch):
    stdout = _TextOnly()
    monkeypatch.setattr(sys, "stdout", stdout)
    configure_logging("json")
    get_logger().info("text only")
    (write, text), flush = stdout.calls
    assert (write, flush) == ("write", ("flush",))
    assert text.endswith("}\n") and json.loads(text)["event"] == "text only"


class _BrokenPipe(io.RawIOBase):
    """The write end of a pipe whose reader went away."""

    def writable(self) -> bool:
        return True

    def write(self, _data: Any) -> int:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.fixture
def broken_pipe_stdout() -> Iterator[io.TextIOWrapper[io.BufferedWriter[_BrokenPipe]]]:
    """A stdout like Python's whose pipe reader went away. Closed at the end, its last
    flush's BrokenPipeError ignored: left to its finalizer, Python 3.13 reports that
    error as unraisable (a warning under pytest, an error with ``-W error``)."""
    stdout = io.TextIOWrapper(io.BufferedWriter(_BrokenPipe()), encoding="utf-8")
    yield stdout
    with contextlib.suppress(BrokenPipeError):
        stdout.close()


@pytest.fixture
def dropped_lines(monkeypatch: pytest.MonkeyPatch) -> DroppedLines:
    """A count of lost lines of the test's own, in place of the process's."""
    dropped = DroppedLines()
    monkeypatch.setattr(service.logs, "DROPPED_LINES", dropped)
    return dropped


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_lines_stdout_refuses_are_counted_and_reported_once(
    monkeypatch, capsys, fmt, dropped_lines, broken_pipe_stdout
):
    dropped = dropped_lines
    counted: list[int] = []
    dropped.on_drop = lambda: counted.append(1)
    monkeypatch.setattr(sys, "stdout", broken_pipe_stdout)
    configure_logging(fmt)
    runner = CallRunner(None)
    outcome = runner.run("svc.S", "Ok", "grpc", "rid-1", lambda r, _i: r, "answer")
    get_logger().error("a line")
    logging.getLogger("lib").warning("a record")
    assert outcome.response == "answer" and outcome.error is None
    assert dropped.count == len(counted) == 3
    note = capsys.readouterr().err
    assert note.count("\n") == 1, note
    assert f"log lines of process {os.getpid()} are lost from now on" in note
    assert "BrokenPipeError" in note


def test_the_first_lost_line_is_reported_at_once(
    monkeypatch, capsys, dropped_lines, broken_pipe_stdout
):
    """The note on stderr comes with the first line lost, not some later one."""
    dropped = dropped_lines
    monkeypatch.setattr(sys, "stdout", broken_pipe_stdout)
    configure_logging("json")
    get_logger().error("the one line")
    assert dropped.count == 1
    assert f"log lines of process {os.getpid()} are lost from now on" in capsys.readouterr().err


@pytest.mark.parametrize("closed", [False, True], ids=["open_stdout", "closed_stdout"])
def test_a_record_that_cannot_be_formatted_is_reported_not_counted_as_lost(
    monkeypatch, capsys, closed, dropped_lines
):
    """A library's bad record (its arguments do not fit its message) is the stdlib's
    "--- Logging error ---" on stderr, whatever stdout's state: no line was refused."""
    dropped = dropped_lines
    stdout = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stdout)
    configure_logging("json")
    if closed:
        stdout.close()
    # To the handler itself: pytest's own log capture would raise on such a record.
    (handler,) = [
        h for h in logging.getLogger().handlers if isinstance(h, service.logs._StdoutHandler)
    ]
    handler.handle(
        logging.LogRecord("lib", logging.WARNING, __file__, 1, "%d moves", ("many",), None)
    )
    assert dropped.count == 0
    assert "--- Logging error ---" in capsys.readouterr().err


def test_a_closed_stdout_drops_lines_but_a_line_that_cannot_be_made_raises(
    monkeypatch, dropped_lines
):
    dropped = dropped_lines
    stdout = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stdout)
    configure_logging("json")
    stdout.close()
    get_logger().info("to a closed stdout")
    assert dropped.count == 1

    class Refusing(io.StringIO):
        def write(self, _text: str) -> int:
            raise ValueError("not a stdout refusal")

    monkeypatch.setattr(sys, "stdout", Refusing())
    with pytest.raises(ValueError, match="not a stdout refusal"):
        get_logger().info("a bug")
    assert dropped.count == 1


def test_loggers_follow_every_reconfiguration_and_bind_still_works(capsys):
    log = get_logger("early")  # made before any configure_logging of this test
    configure_logging("console")
    log.info("as console")
    configure_logging("json")
    log.info("as json")
    log.bind(extra=1).info("bound", seat_token=SECRET)
    console, as_json, bound = capsys.readouterr().out.splitlines()
    assert "as console" in console and not console.startswith("{")
    assert json.loads(as_json)["logger"] == "early"
    assert json.loads(bound)["extra"] == 1 and SECRET not in bound
    assert json.loads(bound)["logger"] == "early"


def test_request_line_from_the_call_runner(capsys):
    """CallRunner writes request_log_fields' fields, in its order, after the leading keys."""
    configure_logging("json")
    runner = CallRunner(None)

    def handler(request: str, info: CallInfo) -> str:
        info.game_id = "g-7"
        info.seat, info.move_number, info.state_id = 1, 12, "0123456789abcdef"
        return request

    def refuse(request: str, info: CallInfo) -> str:
        raise invalid_argument("bad_thing", "no")

    runner.run("svc.S", "Ok", "grpc", "rid-1", handler, "x", "ipv4:127.0.0.1:1")
    runner.run("svc.S", "No", "http", "rid-2", refuse, "x")
    ok, refused = (
        json.loads(line, object_pairs_hook=list) for line in capsys.readouterr().out.splitlines()
    )
    expected = request_log_fields(
        request_id="rid-1",
        method="svc.S/Ok",
        code="OK",
        duration_ms=0,
        game_id="g-7",
        transport="grpc",
        peer="ipv4:127.0.0.1:1",
        seat=1,
        move_number=12,
        state_id="0123456789abcdef",
    )
    assert [key for key, _ in ok] == ["timestamp", "level", "event", *expected, "logger"]
    ok_line = dict(ok)
    assert {key: ok_line[key] for key in expected if key != "duration_ms"} == {
        key: value for key, value in expected.items() if key != "duration_ms"
    }
    assert isinstance(ok_line["duration_ms"], float) and ok_line["duration_ms"] >= 0
    assert [key for key, _ in refused][:4] == ["timestamp", "level", "event", "reason"]
    refused_line = dict(refused)
    assert refused_line["reason"] == "bad_thing" and refused_line["code"] == "InvalidArgument"
    assert refused_line["game_id"] is None and "peer" not in refused_line


def test_a_handler_bug_is_logged_with_its_call_and_traceback(capsys):
    """An exception a handler did not mean becomes INTERNAL for the caller and an error
    line with the method, the request id and the traceback for the operator."""
    configure_logging("json")

    def broken(request: str, info: CallInfo) -> str:
        info.game_id = "game-9"  # the game of its token, read before the bug
        raise RuntimeError("a bug")

    outcome = CallRunner(None).run("svc.S", "Broken", "grpc", "rid-9", broken, "x")
    assert outcome.error is not None and outcome.error.code.name == "INTERNAL"
    bug, request = json_lines(capsys.readouterr().out)
    assert (bug["event"], bug["level"]) == ("unhandled error", "error")
    # Its call named as the request line names it, to find both alike.
    assert {k: bug[k] for k in ("method", "request_id", "transport", "game_id")} == {
        k: request[k] for k in ("method", "request_id", "transport", "game_id")
    }
    assert bug["exception"][0]["exc_type"] == "RuntimeError"  # type: ignore[index]
    assert (request["event"], request["code"], request["request_id"], request["game_id"]) == (
        "request",
        "Internal",
        "rid-9",
        "game-9",
    )


def test_at_warning_level_no_request_line_is_written_answered_or_refused(capsys):
    """docs/operations.md: ``CARDRULES_LOG_LEVEL`` ``warning`` drops the request lines,
    leaving warnings and errors only: a refusal is the client's doing, its line is info
    like an answer's, and only a bug's own line stays."""
    configure_logging("json", "warning")
    runner = CallRunner(None)

    def refuse(request: str, info: CallInfo) -> str:
        raise invalid_argument("BAD_THING", "no")

    def broken(request: str, info: CallInfo) -> str:
        raise RuntimeError("a bug")

    runner.run("svc.S", "Ok", "grpc", "rid-1", lambda request, info: request, "x")
    runner.run("svc.S", "No", "http", "rid-2", refuse, "x")
    runner.run("svc.S", "Broken", "grpc", "rid-3", broken, "x")
    [bug] = json_lines(capsys.readouterr().out)
    assert (bug["event"], bug["level"], bug["request_id"]) == ("unhandled error", "error", "rid-3")


def test_the_request_line_times_the_call_as_the_histogram_does(capsys):
    """``duration_ms`` is the handling time the metrics observe, in milliseconds."""
    configure_logging("json")
    registry = CollectorRegistry()
    runner = CallRunner(ServiceMetrics(registry, {"svc.S": ["Slow"]}))

    def slow(request: str, info: CallInfo) -> str:
        time.sleep(0.05)
        return request

    runner.run("svc.S", "Slow", "http", "rid-1", slow, "x")
    (line,) = json_lines(capsys.readouterr().out)
    seconds = registry.get_sample_value(
        "grpc_server_handling_seconds_sum",
        {"grpc_type": "unary", "grpc_service": "svc.S", "grpc_method": "Slow"},
    )
    assert seconds is not None and seconds >= 0.05
    assert line["duration_ms"] == pytest.approx(seconds * 1000, abs=0.001)


def test_the_known_public_keys_are_not_secret():
    assert not any(
        service.log_redaction.secret_key(key) for key in service.log_redaction._PUBLIC_KEYS
    )


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_the_http_servers_exceptions_keep_their_type_but_not_their_text(capsys, fmt):
    """aiohttp's parser errors quote the request, whose body holds tokens (design section 4)."""
    configure_logging(fmt)
    try:
        raise ValueError(f"Invalid character in chunk size: b'{SECRET}'")
    except ValueError:
        logging.getLogger("aiohttp.server").exception("Error handling request")
        logging.getLogger("service.elsewhere").exception("our own failure")
    out = capsys.readouterr().out
    assert out.count(SECRET) == 1  # only in the line of the logger that is not aiohttp's
    assert "ValueError: message withheld, it may quote the request" in out
    assert "Error handling request" in out


def test_the_http_servers_records_without_an_exception_are_logged_as_they_came(capsys):
    """Only an exception's text is withheld and only the parser's refusals go to debug: a
    warning of aiohttp's without one, or with none to hand, is a line at its level."""
    configure_logging("json")
    http_server = logging.getLogger("aiohttp.server")
    http_server.warning("plain warning")
    http_server.error("no exception at hand", exc_info=True)
    plain, at_hand = json_lines(capsys.readouterr().out)
    assert (plain["level"], plain["event"], plain["logger"]) == (
        "warning",
        "plain warning",
        "aiohttp.server",
    )
    assert (at_hand["level"], at_hand["event"]) == ("error", "no exception at hand")


@pytest.mark.parametrize("level", ["info", "debug"])
@pytest.mark.parametrize(
    "refusal",
    [
        BadHttpMessage("Invalid character in chunk size"),
        RequestPayloadError("Can not decode content-encoding: gzip"),
    ],
    ids=["unparsable_request", "unreadable_body"],
)
def test_requests_the_http_server_refused_are_logged_at_debug_only(capsys, level, refusal):
    """Anyone can send them (a request the parser refused, a body cut short or not
    decompressed), and they already got their 400: no error line, no alert."""
    configure_logging("json", level)
    http_server = logging.getLogger("aiohttp.server")
    for error in (refusal, OSError("disk full")):
        try:
            raise error
        except Exception:
            http_server.exception("Error handling request")
    lines = json_lines(capsys.readouterr().out)
    kinds = [(line["level"], line["exception"][0]["exc_type"]) for line in lines]  # type: ignore[index]
    expected = [("error", "OSError")]
    refused = ("debug", type(refusal).__name__)
    assert kinds == ([refused, *expected] if level == "debug" else expected)


@pytest.mark.parametrize("level", ["info", "debug"])
def test_answers_grpc_could_not_send_to_a_client_gone_are_logged_at_debug_only(capsys, level):
    """grpc.aio logs an answer it could not send (the client closed the connection while
    the answer waited for flow-control room) as an error with a traceback: the client's
    doing, which anyone can repeat. Another of its errors stays an error."""
    configure_logging("json", level)
    grpc_server = logging.getLogger("grpc._cython.cygrpc")
    for error in (ExecuteBatchError("Failed execute_batch"), RuntimeError("a bug")):
        try:
            raise error
        except Exception:
            grpc_server.exception("%s raised in core by servicer method", type(error).__name__)
    lines = json_lines(capsys.readouterr().out)
    kinds = [(line["level"], line["exception"][0]["exc_type"]) for line in lines]  # type: ignore[index]
    expected = [("error", "RuntimeError")]
    assert kinds == ([("debug", "ExecuteBatchError"), *expected] if level == "debug" else expected)


def test_every_secret_name_is_redacted_whatever_its_case(capsys):
    """Each name of REDACTED_KEYS, and each secret ending, hides a text value too (only
    bytes are hidden by their type), in any case: ``API_KEY`` is as secret as ``api_key``."""
    configure_logging("json")
    names = [
        "state",
        "state_token",
        "state_tokens",
        "seat_token",
        "seat_tokens",
        "token",
        "tokens",
        "hand",
        "hands",
        "stock",
        "key",
        "keys",
        "state_key",
        "state_keys",
        "secret",
        "password",
        "PASSWORD",
        "Seat_Token",
        "API_KEY",
        "Signing_Keys",
        "DEALER_HAND",
        "Seat_Hands",
        "Client_Secret",
        "Refresh_TOKENS",
        # camelCase, a word break after a digit too: ``seat2Token`` is seat 2's token.
        "seat2Token",
    ]
    get_logger().info("named", **dict.fromkeys(names, SECRET))
    out = capsys.readouterr().out
    (line,) = json_lines(out)
    assert {name: line[name] for name in names} == dict.fromkeys(names, "[REDACTED]")
    assert SECRET not in out


def test_every_bytes_like_value_is_hidden_with_its_length(capsys):
    """bytes, bytearray and memoryview all can hold a token: each is shown as its size."""
    configure_logging("json")
    raw = SECRET.encode()
    get_logger().info("bytes", raw=raw, buffer=bytearray(raw), view=memoryview(raw))
    (line,) = json_lines(capsys.readouterr().out)
    hidden = f"[REDACTED] {len(raw)} bytes"
    assert (line["raw"], line["buffer"], line["view"]) == (hidden, hidden, hidden)


def test_any_mapping_and_any_set_is_scrubbed_not_only_dicts_and_lists(capsys):
    """A read-only mapping, a set and a frozenset are looked through as a dict and a list
    are; else their ``repr`` would put the token in the line."""
    configure_logging("json")
    raw = SECRET.encode()
    get_logger().info(
        "containers",
        proxy=types.MappingProxyType({"seat_token": SECRET, "raw": raw, "visible": "yes"}),
        as_set={raw},
        as_frozenset=frozenset({raw}),
    )
    out = capsys.readouterr().out
    (line,) = json_lines(out)
    hidden = f"[REDACTED] {len(raw)} bytes"
    assert line["proxy"] == {"seat_token": "[REDACTED]", "raw": hidden, "visible": "yes"}
    assert (line["as_set"], line["as_frozenset"]) == ([hidden], [hidden])
    assert SECRET not in out


def test_mappings_keep_their_keys_as_json_spells_them(capsys):
    """Scrubbing replaces values, not keys: ``None`` stays ``null``, not ``"None"``."""
    configure_logging("json")
    get_logger().info("keys", numbered={2: "two", None: "none", "seat_token": SECRET})
    (line,) = json_lines(capsys.readouterr().out)
    assert line["numbered"] == {"2": "two", "null": "none", "seat_token": "[REDACTED]"}


def test_the_cache_of_public_keys_stays_bounded(capsys):
    """Callers' key names are remembered as not secret up to ``_MAX_PUBLIC_KEYS`` only,
    and a secret key still is redacted once that cache is full."""
    public_keys = service.log_redaction._PUBLIC_KEYS
    saved = set(public_keys)
    configure_logging("json")
    try:
        many = {f"field_{n}": n for n in range(service.log_redaction._MAX_PUBLIC_KEYS + 10)}
        get_logger().info("many fields", **many)
        assert len(public_keys) <= service.log_redaction._MAX_PUBLIC_KEYS
        get_logger().info("then a secret", field_0=0, seat_token=SECRET)
    finally:
        public_keys.clear()
        public_keys.update(saved)
    out = capsys.readouterr().out
    first, secret = json_lines(out)
    assert first["field_4100"] == 4100
    assert secret["seat_token"] == "[REDACTED]" and SECRET not in out


def _raise_quoting_the_request() -> None:
    raise ValueError(f"Invalid character in chunk size: b'{SECRET}'")


def test_each_aiohttp_logger_keeps_the_exceptions_type_and_frames_not_its_text(capsys):
    """Every logger of aiohttp (not only its server's) loses the text, and no other logger
    does, not even another library whose name begins with "aiohttp"."""
    configure_logging("json")
    names = ["aiohttp.server", "aiohttp.web", "aiohttp.internal", "aiohttp_cors", "cardrules"]
    for name in names:
        try:
            _raise_quoting_the_request()
        except ValueError:
            logging.getLogger(name).exception("Error handling request")
    lines = json_lines(capsys.readouterr().out)
    assert [line["logger"] for line in lines] == names
    exceptions = [line["exception"][0] for line in lines]  # type: ignore[index]
    withheld = "ValueError: message withheld, it may quote the request"
    quoted = f"Invalid character in chunk size: b'{SECRET}'"
    assert [exception["exc_value"] for exception in exceptions] == [withheld] * 3 + [quoted] * 2
    assert {exception["exc_type"] for exception in exceptions} == {"ValueError"}
    for exception in exceptions:
        frames = [frame["name"] for frame in exception["frames"]]
        assert frames == [
            "test_each_aiohttp_logger_keeps_the_exceptions_type_and_frames_not_its_text",
            "_raise_quoting_the_request",
        ]


def test_a_library_record_whose_extra_logger_is_not_text_is_still_logged(capsys):
    """``extra`` may set any field, ``logger`` too: the line is written all the same."""
    configure_logging("json")
    logging.getLogger("lib").warning("odd extra", extra={"logger": 5})
    (line,) = json_lines(capsys.readouterr().out)
    assert (line["event"], line["logger"]) == ("odd extra", 5)


def test_timestamps_are_utc_whatever_the_local_time_zone(monkeypatch):
    """``TZ`` of the machine or container never shifts the time of a line."""
    monkeypatch.setenv("TZ", "EST5")  # five hours behind UTC, with no daylight saving
    time.tzset()
    try:
        stamp = utc_timestamp(lambda: 1_780_000_002_250_000_000)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert stamp == "2026-05-28T20:26:42.250000Z"


def test_the_json_line_timestamp_is_the_time_of_the_call(capsys):
    """The wall clock, in UTC: not a monotonic clock or any other count."""
    configure_logging("json")
    before = datetime.now(UTC)
    get_logger().info("now")
    after = datetime.now(UTC)
    (line,) = json_lines(capsys.readouterr().out)
    assert before <= datetime.fromisoformat(str(line["timestamp"])) <= after


def test_process_fields_end_every_line_of_both_kinds(capsys, monkeypatch):
    """``bind_process_fields`` (the worker number): after the call's fields and the
    logger, on structlog's lines and library records alike."""
    monkeypatch.setattr(service.logs, "_process_fields", {})
    configure_logging("json")
    bind_process_fields(worker=2)
    get_logger("order").info("first", zeta=1, alpha=2)
    logging.getLogger("lib").warning("record")
    first, record = (
        json.loads(line, object_pairs_hook=list) for line in capsys.readouterr().out.splitlines()
    )
    assert first == [
        ("timestamp", dict(first)["timestamp"]),
        ("level", "info"),
        ("event", "first"),
        ("zeta", 1),
        ("alpha", 2),
        ("logger", "order"),
        ("worker", 2),
    ]
    # pytest's own log capture adds ``message`` to the record, after these.
    assert record[:5] == [
        ("timestamp", dict(record)["timestamp"]),
        ("level", "warning"),
        ("event", "record"),
        ("logger", "lib"),
        ("worker", 2),
    ]


def test_lines_orjson_needs_a_second_try_for_are_the_same_compact_utf8(monkeypatch):
    """Keys that are not text need orjson's second try: still UTF-8, compact, datetimes
    as their ``repr`` and dataclasses as their fields; and what only json.dumps can write
    (a big integer) is compact too."""
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="utf-8"))
    configure_logging("json")
    when = datetime(2020, 1, 2, tzinfo=UTC)
    get_logger().info("int keys", numbered={1: "one"}, text="♠", when=when, point=_Point(3))
    get_logger().info("big", big=10**30, numbered={1: "one"})
    numbered, big = raw.getvalue().splitlines()
    assert numbered == orjson.dumps(json.loads(numbered))
    assert '"text":"♠"'.encode() in numbered
    line = json.loads(numbered)
    assert (line["numbered"], line["when"], line["point"]) == ({"1": "one"}, repr(when), {"x": 3})
    assert big == json.dumps(json.loads(big), separators=(",", ":")).encode()
    assert json.loads(big)["big"] == 10**30


def test_library_records_are_the_same_compact_utf8_json(monkeypatch):
    """A stdlib record's line is made as structlog's are: compact, UTF-8, no ``\\u``."""
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="utf-8"))
    configure_logging("json")
    logging.getLogger("lib").warning("spades ♠")
    (record,) = raw.getvalue().splitlines()
    assert '"event":"spades ♠"'.encode() in record
    assert record == orjson.dumps(json.loads(record))


def test_library_records_carry_only_their_fields(capsys):
    """structlog's bookkeeping (``_record``, ``_from_structlog``) stays out of the line."""
    configure_logging("json")
    logging.getLogger("lib").warning("plain record")
    (line,) = json_lines(capsys.readouterr().out)
    assert list(line)[:4] == ["timestamp", "level", "event", "logger"]
    assert not [key for key in line if key.startswith("_")]


def test_format_names_are_case_insensitive_as_level_names_are(capsys):
    """``configure_logging`` takes a format name in any case, as it takes a level name."""
    configure_logging("JSON", "INFO")
    get_logger().info("upper case settings")
    (line,) = json_lines(capsys.readouterr().out)
    assert line["event"] == "upper case settings"


def test_console_lines_show_the_stack_asked_for(capsys):
    """``stack_info=True`` is the caller's stack, in console mode as in JSON."""
    configure_logging("console")
    get_logger().info("where", stack_info=True)
    out = capsys.readouterr().out
    assert "Stack (most recent call last):" in out
    assert ", in test_console_lines_show_the_stack_asked_for" in out


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_tokens_in_any_container_or_camel_case_name_are_hidden(capsys, fmt):
    """A protobuf repeated field, a deque, a dict view and a bytes key are looked
    through as lists and dicts are, and ``seatToken`` (the HTTP spelling) is as secret
    as ``seat_token``: their ``repr`` or their name would have put the token in the line.
    An iterator is shown as its ``repr``, which shows nothing it holds."""
    configure_logging(fmt)
    raw = SECRET.encode()
    pending = (token for token in [raw])
    get_logger().info(
        "containers",
        pending=pending,
        repeated=pb.NewGameResponse(seat_tokens=[raw]).seat_tokens,
        queue=collections.deque([raw]),
        viewed={"raw": raw}.values(),
        counts={raw: 1},
        seatToken=SECRET,
        stateKeys=[SECRET],
    )
    out = capsys.readouterr().out
    assert SECRET not in out
    assert next(pending) == raw  # an iterator is not read: it may be a file, or endless
    if fmt == "json":
        (line,) = json_lines(out)
        hidden = f"[REDACTED] {len(raw)} bytes"
        assert [line["repeated"], line["queue"], line["viewed"]] == [[hidden]] * 3
        assert line["counts"] == {hidden: 1}
        assert (line["seatToken"], line["stateKeys"]) == ("[REDACTED]", "[REDACTED]")


# A state key as ``cardrules keygen`` prints it: 43 letters of base64 and "=".
STATE_KEY = "arnx6499M4j0+dWG9m6Z/VQIDfLERvDlhmiwnAihbdA="


def test_a_plain_objects_secret_attributes_are_hidden(capsys):
    """An object that is no dataclass, container or message was shown by its ``repr``:
    ``argparse.Namespace(state_keys=KEY)`` and a ``SimpleNamespace`` put the key in the
    line (a review). Its attributes are now scrubbed as a dataclass's fields are, from
    its ``__dict__`` or its ``__slots__``."""

    class Slotted:
        __slots__ = ("__hidden", "seat_token", "unset", "visible")

        def __init__(self) -> None:
            self.seat_token, self.visible, self.__hidden = SECRET, "yes", SECRET.encode()

    configure_logging("json")
    args = build_parser().parse_args(["serve", "--state-keys", STATE_KEY, "--grpc-port", "1"])
    get_logger("t").info(
        "starting",
        args=args,
        namespace=types.SimpleNamespace(state_keys=STATE_KEY, port=1),
        nested=[types.SimpleNamespace(inner=types.SimpleNamespace(raw=SECRET.encode()))],
        slotted=Slotted(),
    )
    out = capsys.readouterr().out
    (line,) = json_lines(out)
    assert STATE_KEY[:16] not in out and SECRET not in out
    assert isinstance(line["args"], dict)
    assert (line["args"]["state_keys"], line["args"]["grpc_port"]) == ("[REDACTED]", "1")
    assert line["namespace"] == {"state_keys": "[REDACTED]", "port": 1}
    assert line["nested"] == [{"inner": {"raw": f"[REDACTED] {len(SECRET)} bytes"}}]
    assert line["slotted"] == {
        "__hidden": f"[REDACTED] {len(SECRET)} bytes",
        "seat_token": "[REDACTED]",
        "visible": "yes",
    }


def test_the_secret_slots_of_a_base_class_are_hidden_too(capsys):
    """An object's ``__slots__`` are those of every class it is an instance of: a
    subclass's own alone left the base's token to the object's ``repr``."""

    class Base:
        __slots__ = ("__token", "seat_token")

        def __init__(self) -> None:
            self.seat_token, self.__token = SECRET, SECRET.encode()

        def __repr__(self) -> str:
            return f"Base({self.seat_token!r}, {self.__token!r})"

    class Sub(Base):
        __slots__ = ("note",)

        def __init__(self) -> None:
            super().__init__()
            self.note = "hi"

    configure_logging("json")
    get_logger("t").info("starting", obj=Sub())
    out = capsys.readouterr().out
    (line,) = json_lines(out)
    assert SECRET not in out
    assert line["obj"] == {
        "__token": "[REDACTED]",
        "note": "hi",
        "seat_token": "[REDACTED]",
    }


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_a_message_that_is_no_text_is_scrubbed_as_any_value(capsys, fmt):
    """``log.info(value)`` makes the value the line's ``event``: bytes or a mapping there
    are hidden as they are in any other field."""
    configure_logging(fmt)
    get_logger("t").info(SECRET.encode())  # type: ignore[arg-type]  # the mistake
    get_logger("t").info({"seat_token": SECRET})  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert SECRET not in out
    if fmt == "json":
        assert [line["event"] for line in json_lines(out)] == [
            f"[REDACTED] {len(SECRET)} bytes",
            {"seat_token": "[REDACTED]"},
        ]


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_a_key_in_an_objects_text_or_an_exceptions_message_is_hidden(capsys, fmt):
    """What holds a key as text under no secret name (``Namespace(host=KEY)``, an
    exception's message ``bad key KEY``) is shown with the key hidden
    (``config.hide_keys``), logged as a value and with ``log.exception`` alike."""
    configure_logging(fmt)
    log = get_logger("t")
    log.info(
        "objects",
        namespace=types.SimpleNamespace(host=STATE_KEY),
        error=ValueError(f"bad key {STATE_KEY}"),
    )
    try:
        raise ValueError(f"bad key {STATE_KEY}")
    except ValueError:
        log.exception("failed")
    try:
        try:
            raise OSError(2, "No such file or directory", f"/run/secrets/{STATE_KEY}")
        except OSError as error:
            raise RuntimeError("cannot start") from error
    except RuntimeError:
        log.exception("chained")
    out = capsys.readouterr().out
    assert STATE_KEY[:16] not in out and STATE_KEY[-16:] not in out
    assert out.count("[a state key, not shown]") == 4
    assert "bad key [a state key, not shown]" in out and "cannot start" in out
    if fmt == "json":
        first = json_lines(out)[0]
        assert first["namespace"] == "namespace(host='[a state key, not shown]')"
        assert first["error"] == "ValueError('bad key [a state key, not shown]')"


def test_objects_without_secrets_are_shown_as_before(capsys):
    """Only what holds a secret changes: an enum still as its value, a UUID as its text,
    a path or a date as its ``repr``, an exception as its ``repr``, a namespace, a module
    and a class too."""

    class Colour(enum.Enum):
        RED = 1

    configure_logging("json")
    values: dict[str, Any] = {
        "colour": Colour.RED,
        "id": uuid.UUID(int=5),
        "path": pathlib.Path("/run/secrets/keys"),
        "day": datetime(2020, 1, 2, tzinfo=UTC),
        "error": KeyError("seat 7"),
        "namespace": types.SimpleNamespace(port=1, host="localhost"),
        "items": [None, 1, "a", 2.5, True],
        "module": json,  # its names are its code's: not looked through, as a class's
        "kind": KeyError,
    }
    get_logger("t").info("plain", **values)
    (line,) = json_lines(capsys.readouterr().out)
    shown = {key: line[key] for key in values}
    assert shown == {
        "colour": 1,
        "id": "00000000-0000-0000-0000-000000000005",
        "path": repr(values["path"]),
        "day": repr(values["day"]),
        "error": "KeyError('seat 7')",
        "namespace": "namespace(port=1, host='localhost')",
        "items": [None, 1, "a", 2.5, True],
        "module": repr(json),
        "kind": repr(KeyError),
    }


class _Node:
    """A tree's node with a link to its parent: every node reaches every other."""

    def __init__(self, depth: int, parent: _Node | None = None) -> None:
        self.parent = parent
        self.children = [_Node(depth - 1, self) for _ in range(4)] if depth else []


def test_an_object_nested_too_deep_without_a_secret_found_is_shown_by_its_type(capsys):
    """A Logger, or a tree's node with a link to its parent, nests deeper than the 8
    levels looked through: written as the mapping of its attributes 8 levels deep, its
    lines were of 154,142 and 64,226 characters (a review), and by its repr, a Namespace
    showed a request's seat token nested eight lists down (another). A secret within the
    8 levels still makes the mapping; an object nesting no deeper is shown by its repr."""
    configure_logging("json")
    root = _Node(7)
    leaf = root.children[0].children[0]
    request = pb.LegalMovesRequest(seat=1, seat_token=SECRET.encode())
    deep = argparse.Namespace(batch=[[[[[[[[request]]]]]]]])
    get_logger("t").info(
        "objects", tree=root, leaf=leaf, value=logging.getLogger("cardrules"), deep=deep
    )
    out = capsys.readouterr().out
    (line,) = json_lines(out)
    assert len(out) < 400 and SECRET not in out
    assert (line["tree"], line["leaf"], line["value"], line["deep"]) == (
        "[REDACTED] _Node nested too deep",
        "[REDACTED] _Node nested too deep",
        "[REDACTED] Logger nested too deep",
        "[REDACTED] Namespace nested too deep",
    )
    get_logger("t").info("shallow", value=argparse.Namespace(players=4))
    assert json_lines(capsys.readouterr().out)[0]["value"] == "Namespace(players=4)"
    secret_inside = _Node(1)
    secret_inside.children[0].seat_token = SECRET  # type: ignore[attr-defined]
    get_logger("t").info("a secret", tree=secret_inside)
    out = capsys.readouterr().out
    (line,) = json_lines(out)
    assert SECRET not in out and line["tree"]["children"][0]["seat_token"] == "[REDACTED]"  # type: ignore[index]


def test_an_exceptions_message_with_a_key_hidden_is_its_exc_value(capsys):
    """``exc_value`` is the message (docs/operations.md), a key in it hidden: the copy
    that hides it wrote ``FileNotFoundError: [Errno 2] ...``, the type twice. One that
    caused another keeps its type's name as ``exc_type``."""
    configure_logging("json")
    path = f"/run/secrets/{STATE_KEY}"
    try:
        try:
            open(path)  # noqa: SIM115
        except OSError as error:
            raise ValueError(f"bad key {STATE_KEY}") from error
    except ValueError:
        get_logger("t").exception("failed")
    out = capsys.readouterr().out
    (line,) = json_lines(out)
    raised, cause = cast(list[dict[str, object]], line["exception"])
    hidden = path.replace(STATE_KEY, "[a state key, not shown]")
    assert (raised["exc_type"], raised["exc_value"]) == (
        "ValueError",
        "bad key [a state key, not shown]",
    )
    assert (cause["exc_type"], cause["exc_value"]) == (
        "FileNotFoundError",
        f"[Errno 2] No such file or directory: '{hidden}'",
    )
    assert STATE_KEY[:16] not in out


def test_an_exceptions_notes_and_syntax_error_are_logged_as_raised(capsys):
    """docs/operations.md, "Log lines": ``exc_notes`` and ``syntax_error`` of an
    exception that holds no secret, which is logged as it is, not as a copy."""
    configure_logging("json")
    try:
        error = ValueError("no such move")
        error.add_note("while applying move 7")
        raise error
    except ValueError:
        get_logger("t").exception("failed")
    try:
        compile("x = = 1", "<rules>", "exec")
    except SyntaxError:
        get_logger("t").exception("failed")
    noted, syntax = json_lines(capsys.readouterr().out)
    [with_note] = cast(list[dict[str, object]], noted["exception"])
    assert with_note["exc_notes"] == ["while applying move 7"]
    [syntax_error] = cast(list[dict[str, Any]], syntax["exception"])
    where = syntax_error["syntax_error"]
    assert (where["filename"], where["lineno"]) == ("<rules>", 1)


def test_a_copy_that_hides_a_key_keeps_the_notes_with_keys_hidden(capsys):
    """The copy logged in place of an exception whose message holds a state key keeps
    what ``add_note`` added, a key in it hidden too."""
    configure_logging("json")
    try:
        error = ValueError(f"bad key {STATE_KEY}")
        error.add_note(f"while loading {STATE_KEY} from --state-keys-file")
        raise error
    except ValueError:
        get_logger("t").exception("failed")
    out = capsys.readouterr().out
    [raised] = cast(list[dict[str, object]], json_lines(out)[0]["exception"])
    assert raised["exc_value"] == "bad key [a state key, not shown]"
    assert raised["exc_notes"] == ["while loading [a state key, not shown] from --state-keys-file"]
    assert STATE_KEY[:16] not in out


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_a_key_beside_redacted_bytes_in_an_exceptions_arguments_is_hidden(capsys, fmt):
    """A copy that shows the arguments scrubbed of bytes hides a key among them too, in
    ``exc_value`` and as a field's value."""
    configure_logging(fmt)
    error = KeyError(b"SEAT-TOKEN-BYTES", f"state key {STATE_KEY}")
    try:
        raise error
    except KeyError:
        get_logger("t").exception("failed", error=error)
    out = capsys.readouterr().out
    assert STATE_KEY[:16] not in out and "SEAT-TOKEN-BYTES" not in out
    assert out.count("[a state key, not shown]") == 2, out


def test_bytes_keys_of_a_mapping_inside_an_object_are_redacted(capsys):
    """An object is logged by its attributes only when none holds a secret it cannot show
    scrubbed; a token as a mapping's key is scrubbed, not left to the object's repr."""
    configure_logging("json")
    get_logger("t").info("options", options=argparse.Namespace(by_seat={b"SEAT-TOKEN-BYTES": 0}))
    out = capsys.readouterr().out
    assert "SEAT-TOKEN-BYTES" not in out
    assert json_lines(out)[0]["options"] == {"by_seat": {"[REDACTED] 16 bytes": 0}}


def test_a_base_exception_that_escapes_is_one_crash_line(capsys):
    """docs/operations.md, "Log lines": one JSON line instead of Python's traceback, also
    for what is no ``Exception`` (a CancelledError escaping ``asyncio.run``), and status 1."""
    configure_logging("json")

    def run() -> int:
        raise asyncio.CancelledError()

    assert status_or_crash(run, get_logger("cardrules.server"), "server crashed") == 1
    captured = capsys.readouterr()
    [line] = json_lines(captured.out)
    [raised] = cast(list[dict[str, object]], line["exception"])
    assert (line["event"], raised["exc_type"]) == ("server crashed", "CancelledError")
    assert "Traceback" not in captured.err


@pytest.fixture
def fresh_public_keys() -> Iterator[None]:
    """``redact`` remembers, process-wide, each key it found not secret, and takes a
    remembered key by another path: a test of a key's first line starts with none
    remembered, whatever ran before it, and puts back what was."""
    public_keys = service.log_redaction._PUBLIC_KEYS
    saved = set(public_keys)
    public_keys.clear()
    try:
        yield
    finally:
        public_keys.clear()
        public_keys.update(saved)


@pytest.mark.usefixtures("fresh_public_keys")
def test_a_library_records_log_record_is_left_to_structlog_which_drops_it():
    """structlog keeps a library line's LogRecord in the event for its processors and
    drops it before rendering: looking through it doubled the cost of a library line."""
    record = logging.LogRecord("aiohttp.server", logging.INFO, __file__, 1, "hi %s", ("x",), None)
    event = service.log_redaction.redact(None, "info", {"event": "hi", "_record": record})
    assert event["_record"] is record


# The bytes of a seat token as a bug's exception might hold them (``KeyError(token)``).
TOKEN_BYTES = b"SEATTOKENBYTES-secret-0123"
TOKEN_HIDDEN = f"KeyError('[REDACTED] {len(TOKEN_BYTES)} bytes')"


def _caught(error: BaseException) -> BaseException:
    """``error`` raised and caught: with a traceback, and no longer being handled."""
    try:
        raise error
    except BaseException as caught:
        return caught


def test_an_exception_logged_as_a_field_or_after_its_handler_shows_no_bytes(capsys):
    """An exception passed as an ordinary field is shown by its arguments scrubbed; one
    passed as ``exc_info`` after its ``except`` block ended (so ``sys.exc_info()`` is
    empty) is scrubbed as one being handled is."""
    configure_logging("json")
    log = get_logger("t")
    log.warning("failed", error=KeyError(TOKEN_BYTES))
    error = _caught(KeyError(TOKEN_BYTES))
    log.error("boom", exc_info=error)
    out = capsys.readouterr().out
    field, passed = json_lines(out)
    assert field["error"] == TOKEN_HIDDEN
    (shown,) = cast(list[dict[str, object]], passed["exception"])
    assert (shown["exc_type"], shown["exc_value"]) == ("KeyError", TOKEN_HIDDEN)
    assert "SEATTOKEN" not in out


def test_a_cause_raised_outside_a_handler_is_scrubbed_and_the_callers_chain_kept(capsys):
    """``raise ValueError(...) from stored``, ``stored`` a ``KeyError(token)`` caught
    earlier: the wrapper holds no secret and has no context, only its cause does. The
    cause is shown scrubbed; the caller's exception still has its own cause after."""
    configure_logging("json")
    stored = _caught(KeyError(TOKEN_BYTES))
    try:
        raise ValueError("wrapper") from stored
    except ValueError as raised:
        wrapper = raised
    get_logger("t").error("wrapped", exc_info=wrapper)
    out = capsys.readouterr().out
    (line,) = json_lines(out)
    outer, cause = cast(list[dict[str, object]], line["exception"])
    assert (outer["exc_type"], cause["is_cause"], cause["exc_value"]) == (
        "ValueError",
        True,
        TOKEN_HIDDEN,
    )
    assert "SEATTOKEN" not in out
    # Logging copies what it hides: the caller's exceptions are as they were.
    assert wrapper.__cause__ is stored and wrapper.__suppress_context__
    assert stored.args == (TOKEN_BYTES,)


def test_the_exception_a_secret_one_was_raised_while_handling_is_still_shown(capsys):
    """A ``KeyError(token)`` raised while handling an ``OSError``: the copy that hides the
    token keeps the OSError as its context, and the line shows both (setting a copy's
    ``__cause__`` would hide its context, as ``raise ... from`` does)."""
    configure_logging("json")
    try:
        try:
            raise OSError("the first failure")
        except OSError:
            raise KeyError(TOKEN_BYTES)  # noqa: B904 (the context is the point)
    except KeyError:
        get_logger("t").exception("failed")
    out = capsys.readouterr().out
    (line,) = json_lines(out)
    entries = cast(list[dict[str, object]], line["exception"])
    shown = [(entry["exc_type"], entry["exc_value"]) for entry in entries]
    assert shown == [("KeyError", TOKEN_HIDDEN), ("OSError", "the first failure")]
    assert "SEATTOKEN" not in out


def test_a_called_process_errors_command_with_a_key_is_logged_with_the_key_hidden(capsys):
    """A tool run with the key on its command line fails: the exception's text quotes the
    command. Its copy with the key hidden keeps its type's name, and is made without
    calling ``CalledProcessError``'s own constructor, which takes other arguments."""
    configure_logging("json")
    try:
        raise subprocess.CalledProcessError(1, ["tool", "--key", STATE_KEY])
    except subprocess.CalledProcessError:
        get_logger("t").exception("tool failed")
    out = capsys.readouterr().out
    (line,) = json_lines(out)
    (shown,) = cast(list[dict[str, object]], line["exception"])
    assert (shown["exc_type"], shown["exc_value"]) == (
        "CalledProcessError",
        "Command '['tool', '--key', '[a state key, not shown]']' returned non-zero exit status 1.",
    )
    assert STATE_KEY[:16] not in out


class _Seat:
    """A class whose name starts with ``_``, holding its token in a private slot: Python
    stores ``__token`` as ``_Seat__token``, the class's name without its ``_``."""

    __slots__ = ("__token",)

    def __init__(self, token: str) -> None:
        self.__token = token

    def __repr__(self) -> str:
        return f"_Seat({self.__token!r})"


def test_a_private_slot_of_a_class_named_with_an_underscore_is_hidden(capsys):
    configure_logging("json")
    get_logger("t").info("seated", seat=_Seat(SECRET))
    out = capsys.readouterr().out
    (line,) = json_lines(out)
    assert line["seat"] == {"__token": "[REDACTED]"}
    assert SECRET not in out


@pytest.mark.usefixtures("fresh_public_keys")
def test_the_first_exception_a_process_logs_to_the_console_is_rendered(capsys):
    """``exc_info`` is left for the console renderer, which needs the exception itself,
    however many lines came before: the first line ever to carry one took another path
    than the next (``redact`` remembers each key it saw)."""
    configure_logging("console")
    for _ in range(2):
        try:
            raise KeyError(TOKEN_BYTES)
        except KeyError:
            get_logger("t").exception("failed")
        out = capsys.readouterr().out
        assert "Traceback (most recent call last):" in out
        assert out.rstrip().endswith(f"\nKeyError: {TOKEN_HIDDEN}"), out
        assert "SEATTOKEN" not in out


def _raised_from(
    stored: BaseException, link: str, wrapper: ValueError | None = None
) -> BaseException:
    """``wrapper`` (``ValueError("wrapper")``) raised with ``stored`` as its cause
    (``raise ... from``) or its context (raised while ``stored`` was being handled), and
    caught."""
    wrapper = ValueError("wrapper") if wrapper is None else wrapper
    try:
        if link == "cause":
            raise wrapper from stored
        try:
            raise stored
        except BaseException:
            raise wrapper  # noqa: B904 (the context is the point)
    except ValueError as raised:
        return raised


def _logged_wrapper(
    capsys: pytest.CaptureFixture[str], link: str
) -> tuple[str, list[dict[str, object]], BaseException, BaseException]:
    """A JSON line logging a wrapper of ``KeyError(token)`` linked by ``link``: what was
    written, the line's exception entries, the stored error and the wrapper."""
    configure_logging("json")
    stored = _caught(KeyError(TOKEN_BYTES))
    wrapper = _raised_from(stored, link)
    get_logger("t").error("wrapped", exc_info=wrapper)
    out = capsys.readouterr().out
    (line,) = json_lines(out)
    return out, cast(list[dict[str, object]], line["exception"]), stored, wrapper


@pytest.mark.parametrize("link", ["cause", "context"])
def test_an_exception_that_caused_another_keeps_its_type_with_its_bytes_hidden_json(capsys, link):
    """The copy that hides ``KeyError(token)``'s bytes is named ``KeyError``, as a copy
    that hides a key is: as the cause or context of another its class's name is the
    line's ``exc_type``, which was ``SecretWithheldError``, missed by a search by type."""
    out, (outer, cause), _, _ = _logged_wrapper(capsys, link)
    assert (outer["exc_type"], cause["exc_type"], cause["exc_value"], cause["is_cause"]) == (
        "ValueError",
        "KeyError",
        TOKEN_HIDDEN,
        link == "cause",
    )
    assert "SEATTOKEN" not in out and "SecretWithheldError" not in out


@pytest.mark.parametrize("link", ["cause", "context"])
def test_an_exception_that_caused_another_keeps_its_type_with_its_bytes_hidden_console(
    capsys, link
):
    """The console writes each exception of the chain under its class's name: the copy
    that hides the bytes is written as a ``KeyError``, not a ``SecretWithheldError``."""
    configure_logging("console")
    stored = _caught(KeyError(TOKEN_BYTES))
    get_logger("t").error("wrapped", exc_info=_raised_from(stored, link))
    out = capsys.readouterr().out
    assert f"\nKeyError: {TOKEN_HIDDEN}\n" in out, out
    assert "SEATTOKEN" not in out and "SecretWithheldError: KeyError" not in out


@pytest.mark.parametrize("link", ["cause", "context"])
def test_an_exception_only_its_cause_held_a_secret_of_is_logged_with_its_message_json(capsys, link):
    """The wrapper's copy, made to hold the scrubbed cause, has the wrapper's message as
    ``exc_value`` (docs/operations.md), as a copy that hides a key has: it was
    ``ValueError: wrapper``, the type twice. The caller's exceptions are left as they were."""
    out, entries, stored, wrapper = _logged_wrapper(capsys, link)
    shown = [(entry["exc_type"], entry["exc_value"]) for entry in entries]
    assert shown == [("ValueError", "wrapper"), ("KeyError", TOKEN_HIDDEN)]
    assert "SEATTOKEN" not in out
    assert (wrapper.__cause__ if link == "cause" else wrapper.__context__) is stored
    # One with no message is logged with none, as Python writes it.
    get_logger("t").error("wrapped", exc_info=_raised_from(stored, link, ValueError()))
    (line,) = json_lines(capsys.readouterr().out)
    assert cast(list[dict[str, object]], line["exception"])[0]["exc_value"] == ""
    assert str(wrapper) == "wrapper" and stored.args == (TOKEN_BYTES,)


@pytest.mark.parametrize("link", ["cause", "context"])
def test_an_exception_only_its_cause_held_a_secret_of_is_logged_with_its_message_console(
    capsys, link
):
    """On the console the wrapper ends the traceback as Python writes it, ``ValueError:
    wrapper``, not ``SecretWithheldError: ValueError: wrapper``."""
    configure_logging("console")
    stored = _caught(KeyError(TOKEN_BYTES))
    get_logger("t").error("wrapped", exc_info=_raised_from(stored, link))
    out = capsys.readouterr().out
    assert out.rstrip().endswith("\nValueError: wrapper"), out
    assert "SEATTOKEN" not in out and "SecretWithheldError" not in out


class _UnprintableError(ValueError):
    """A bug's exception whose text cannot be made."""

    def __str__(self) -> str:
        raise RuntimeError("no text")


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_an_exception_with_no_text_caused_by_a_secret_one_is_still_logged(capsys, fmt):
    """Its copy, made to hold the scrubbed cause, takes its text: a ``__str__`` that
    failed there made the logging call raise, and no line was written."""
    configure_logging(fmt)
    try:
        try:
            raise KeyError(TOKEN_BYTES)
        except KeyError:
            raise _UnprintableError("x")  # noqa: B904 (the context is the point)
    except ValueError:
        get_logger("t").exception("failed")
    out = capsys.readouterr().out
    if fmt == "json":
        (line,) = json_lines(out)
        entries = cast(list[dict[str, object]], line["exception"])
        shown = [(entry["exc_type"], entry["exc_value"]) for entry in entries]
        assert shown == [
            ("_UnprintableError", "<exception str() failed>"),
            ("KeyError", TOKEN_HIDDEN),
        ]
    else:
        assert out.rstrip().endswith("_UnprintableError: <exception str() failed>"), out
    assert "SEATTOKEN" not in out


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_a_group_only_whose_context_held_a_secret_is_logged_with_its_members(capsys, fmt):
    """An ExceptionGroup raised while a ``KeyError(token)`` was handled: its copy, made to
    hold the scrubbed context, is a group too. It was not, and its members were lost."""
    configure_logging(fmt)
    try:
        try:
            raise KeyError(TOKEN_BYTES)
        except KeyError:
            raise ExceptionGroup("calls failed", [ValueError("member")])  # noqa: B904 (the context)
    except ExceptionGroup:
        get_logger("t").exception("failed")
    out = capsys.readouterr().out
    if fmt == "json":
        (line,) = json_lines(out)
        group, context = cast(list[dict[str, Any]], line["exception"])
        assert (group["exc_type"], group["exc_value"], group["is_group"]) == (
            "ExceptionGroup",
            "calls failed (1 sub-exception)",
            True,
        )
        ((member,),) = group["exceptions"]  # each member's chain, a list
        assert (member["exc_type"], member["exc_value"]) == ("ValueError", "member")
        assert (context["exc_type"], context["exc_value"]) == ("KeyError", TOKEN_HIDDEN)
    else:
        assert "| ExceptionGroup: calls failed (1 sub-exception)" in out, out
        assert "| ValueError: member" in out, out
    assert "SEATTOKEN" not in out
