"""A server's last resort (docs/operations.md, "Log lines"): an exception that escapes a
single process's start-up is one JSON error line, ``server crashed``, as a worker's is
``worker crashed``, and exit status 1; never Python's plain traceback on stderr, which a
JSON collector cannot parse and which quotes the exception's arguments unscrubbed."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from tests.service.server_process import events, loaded_at_start, serve_and_fail

SEAT_TOKEN = "c2VhdCB0b2tlbiB0aGF0IG5vIGxvZyBsaW5lIG1heSBxdW90ZQ"

# Test-only fault, loaded by the server's interpreter at start (``sitecustomize`` on
# PYTHONPATH): the gateway's CORS policy, built as the gateway starts, raises an error
# no code path expects, quoting a seat token. No natural trigger stays one: each is a
# bug to fix.
FAULT = f"""
import service.http_cors


def _fail(*_args, **_kwargs):
    raise KeyError({{"seat_token": "{SEAT_TOKEN}"}})


service.http_cors.CorsPolicy = _fail
"""


def test_an_unexpected_error_at_start_is_one_json_line_and_exit_1(tmp_path: Path):
    path = loaded_at_start(tmp_path, FAULT)
    done = serve_and_fail("--http-port", "0", env={"PYTHONPATH": path})
    assert done.returncode == 1
    assert done.stderr == ""  # no traceback
    lines = events(done.stdout)  # JSON lines only
    [crash] = [line for line in lines if line["level"] == "error"]
    assert (crash["event"], crash["logger"]) == ("server crashed", "cardrules.server")
    [exception] = cast(list[dict[str, Any]], crash["exception"])
    assert exception["exc_type"] == "KeyError"
    assert exception["frames"][-1]["name"] == "_fail"
    assert SEAT_TOKEN not in done.stdout and "[REDACTED]" in exception["exc_value"]
