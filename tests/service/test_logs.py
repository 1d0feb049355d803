"""structlog setup (design section 6): JSON lines, console, levels, and no secrets ever."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator

import pytest
import structlog
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from service.logs import (
    REDACTED_KEYS,
    configure_logging,
    get_logger,
    request_log_fields,
)

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
