"""The service config docs/operations.md gives other gRPC clients ("Scaling and load
balancing") is the Python client's own, retry policy included: clients without
client-side health checking (grpc-js) rely on that policy at a rolling stop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cardrules.client.channel import RECONNECT_OPTIONS, RETRY_POLICY, service_config

from service.server import MIN_PING_INTERVAL_MS
from tests.doc_blocks import fenced_blocks

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def json_blocks(text: str) -> list[Any]:
    """Every fenced ``json`` block of ``text``, parsed."""
    return [json.loads(block) for block in fenced_blocks(text, "json")]


def test_the_documented_service_config_is_the_python_clients() -> None:
    configs = [block for block in json_blocks(OPERATIONS.read_text()) if "methodConfig" in block]
    assert len(configs) == 1, "docs/operations.md should give one service config"
    (documented,) = configs
    assert documented == service_config("round_robin")
    (method,) = documented["methodConfig"]
    assert method["retryPolicy"] == RETRY_POLICY
    assert set(RETRY_POLICY["retryableStatusCodes"]) == {"UNAVAILABLE", "CANCELLED"}


def test_the_documented_reconnect_backoff_is_the_python_clients() -> None:
    text = " ".join(OPERATIONS.read_text().split())
    for name, value in RECONNECT_OPTIONS:
        assert f"`{name}` {value}" in text, name


def test_the_documented_keepalive_allowance_is_the_servers() -> None:
    text = " ".join(OPERATIONS.read_text().split())
    assert f"`grpc.http2.min_ping_interval_without_data_ms` {MIN_PING_INTERVAL_MS}" in text
    assert f"accepts a ping every {MIN_PING_INTERVAL_MS // 1000} s" in text
