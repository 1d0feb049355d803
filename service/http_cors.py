"""CORS for browser clients of the HTTP gateway (design section 6).

Only origins listed in ``--cors-origins`` (``CARDRULES_CORS_ORIGINS``) get an
``Access-Control-Allow-Origin``; none are listed by default, so browsers on
other sites cannot call the service. ``*`` allows every origin. No credentials
are involved: the game travels in the request body, never in cookies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

ALLOWED_HEADERS = "Content-Type, X-Request-Id"
EXPOSED_HEADERS = "X-Request-Id"
MAX_AGE_SECONDS = "600"


class CorsPolicy:
    """Which browser origins may call; the headers that tell the browser so."""

    def __init__(self, origins: Iterable[str]) -> None:
        self._origins = frozenset(origins)
        self._any = "*" in self._origins

    @property
    def enabled(self) -> bool:
        return bool(self._origins)

    def allows(self, origin: str | None) -> bool:
        return origin is not None and (self._any or origin in self._origins)

    def response_headers(self, origin: str | None) -> dict[str, str]:
        """Headers for an actual (non-preflight) response to ``origin``."""
        headers: dict[str, str] = {}
        if self.enabled and not self._any:
            headers["Vary"] = "Origin"  # the answer depends on the Origin: caches must know
        if self.allows(origin):
            assert origin is not None
            headers["Access-Control-Allow-Origin"] = "*" if self._any else origin
            headers["Access-Control-Expose-Headers"] = EXPOSED_HEADERS
        return headers

    def preflight_headers(
        self, origin: str | None, request_headers: Mapping[str, str], methods: Iterable[str]
    ) -> dict[str, str]:
        """Headers for the answer to a preflight ``OPTIONS``; no ``Allow-Origin`` if refused."""
        headers = self.response_headers(origin)
        wanted = request_headers.get("Access-Control-Request-Method", "")
        if "Access-Control-Allow-Origin" in headers and wanted in methods:
            headers.pop("Access-Control-Expose-Headers")
            headers["Access-Control-Allow-Methods"] = ", ".join(methods)
            headers["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
            headers["Access-Control-Max-Age"] = MAX_AGE_SECONDS
        else:
            headers.pop("Access-Control-Allow-Origin", None)
            headers.pop("Access-Control-Expose-Headers", None)
        return headers


def parse_origins(text: str) -> tuple[str, ...]:
    """``"https://a.example, https://b.example"`` -> the origins; raises ``ValueError``."""
    origins = tuple(part.strip().rstrip("/") for part in text.split(",") if part.strip())
    for origin in origins:
        if origin == "*":
            continue
        scheme, _, rest = origin.partition("://")
        if scheme not in ("http", "https") or not rest or "/" in rest:
            raise ValueError(f"{origin!r} is not an origin like https://example.com[:port]")
    return origins
