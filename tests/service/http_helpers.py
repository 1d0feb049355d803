"""Helpers for tests of the HTTP/JSON gateway (design sections 3, 5 and 6).

Against a real ``cardrules serve``: one request with its status, headers and
JSON body, and the decoding of a refusal's ``google.rpc.Status`` JSON. In
process: the Krypkasino gateway served on a loopback port for one scenario.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from service.calls import CallRunner
from service.config import ServerConfig
from service.http_cors import CorsPolicy
from service.http_gateway import BODY_SECONDS, HttpGateway, start_http
from service.openapi import SERVICES
from service.server import build_api
from service.tokens import KeyRing
from tests.service.grpc_helpers import names_its_field
from tests.service.server_process import TEST_KEY, ServerProcess

ORIGIN = "https://play.example"
Scenario = Callable[[aiohttp.ClientSession, str], Awaitable[None]]


# -- a real server ------------------------------------------------------------------------


def exchange(
    url: str,
    body: bytes | None = None,
    *,
    method: str = "POST",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], Any]:
    """One HTTP request; the status, headers and JSON body (None if empty), whatever the
    status."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    if body is not None and "Content-Type" not in (headers or {}):
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), _json(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), _json(error.read())


def _json(body: bytes) -> Any:
    return json.loads(body) if body else None


def rpc(server: ServerProcess, name: str, body: dict[str, Any]) -> Any:
    status, _, value = exchange(
        f"{server.http_url}/v1/krypkasino:{name}", json.dumps(body).encode()
    )
    assert status == 200, value
    return value


def refusal(status_json: Any) -> tuple[int, str, dict[str, str], dict[str, str]]:
    """Code, reason, metadata and field violations of a Status; exactly one ErrorInfo.

    Not ``grpc_helpers.status_refusal`` on the parsed body: this reads the JSON
    that clients get (its keys, the ``@type`` URLs, camelCase ``fieldViolations``),
    which parsing into a ``google.rpc.Status`` would accept in either spelling.
    """
    assert set(status_json) <= {"code", "message", "details"}
    infos = [d for d in status_json["details"] if d["@type"].endswith("/google.rpc.ErrorInfo")]
    bad = [d for d in status_json["details"] if d["@type"].endswith("/google.rpc.BadRequest")]
    assert (
        len(infos) == 1 and len(bad) <= 1 and len(infos) + len(bad) == len(status_json["details"])
    )
    assert infos[0]["domain"] == "cardrules"
    violations = {v.get("field", ""): v["description"] for b in bad for v in b["fieldViolations"]}
    # Each violation's reason is the ErrorInfo's (docs/api.md, "Errors").
    reasons = {v.get("reason") for b in bad for v in b["fieldViolations"]}
    assert reasons <= {infos[0]["reason"]}, (reasons, infos[0])
    assert not any(names_its_field(*item) for item in violations.items()), violations
    return status_json["code"], infos[0]["reason"], infos[0].get("metadata", {}), violations


# -- the gateway in process ---------------------------------------------------------------


def krypkasino_gateway(
    cors: tuple[str, ...] = (),
    limit: int = 4096,
    body_seconds: float = BODY_SECONDS,
    keys: str = TEST_KEY,
    on_refused_preflight: Callable[[], None] | None = None,
) -> HttpGateway:
    api = build_api(ServerConfig(), KeyRing.parse(keys), None)
    return HttpGateway(
        api,
        CallRunner(None),
        SERVICES,
        max_request_bytes=limit,
        cors=CorsPolicy(cors),
        openapi=b'{"openapi": "3.1.0"}',
        body_seconds=body_seconds,
        on_refused_preflight=on_refused_preflight,
    )


def run(gateway: HttpGateway, scenario: Scenario, **http_options: Any) -> None:
    """Serve ``gateway`` on a free loopback port for the length of ``scenario``;
    ``http_options`` go to ``start_http`` (e.g. ``keepalive_seconds``)."""

    async def main() -> None:
        server = await start_http(
            gateway, "127.0.0.1", 0, reuse_port=False, grace_seconds=1, **http_options
        )
        try:
            async with aiohttp.ClientSession() as session:
                await scenario(session, f"http://127.0.0.1:{server.port}")
        finally:
            await server.stop()

    asyncio.run(main())


def preflight_headers(origin: str, method: str = "POST") -> dict[str, str]:
    return {
        "Origin": origin,
        "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "content-type",
    }
