"""CORS for browser clients of the HTTP gateway (design section 6).

Only origins listed in ``--cors-origins`` (``CARDRULES_CORS_ORIGINS``) get an
``Access-Control-Allow-Origin``; none are listed by default, so browsers on
other sites cannot call the service. ``*`` allows every origin. Origins are
compared as browsers serialise them: scheme and host in lowercase, no default
port (``https://Play.Example:443`` is ``https://play.example``). No credentials
are involved: the game travels in the request body, never in cookies.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

# Content-Encoding is no CORS-safelisted header: a page sending a gzip body needs it allowed;
# nor are W3C trace context's and baggage, which OpenTelemetry's browser instrumentation
# adds to every call (its default propagators); nor Accept, Accept-Language and
# Content-Language once their value is not a safelisted one (Fetch: an Accept with a
# quoted parameter or over 128 bytes, a language tag with "_"). A header not listed fails
# the preflight, and with it every call of the page; the server reads none of these four.
ALLOWED_HEADERS = (
    "Accept, Accept-Language, Baggage, Content-Encoding, Content-Language, Content-Type, "
    "Grpc-Timeout, Traceparent, Tracestate, X-Request-Id"
)
# What docs/api.md tells clients to read: a 405's Allow, a 415's Accept-Encoding. A page
# reads no other response header than the safelisted ones (Content-Type ...) without this.
EXPOSED_HEADERS = "X-Request-Id, Retry-After, Allow, Accept-Encoding"
MAX_AGE_SECONDS = "600"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_PORT = re.compile(r"[0-9]{1,5}")
# A host as browsers write it in an Origin: a name of letters, digits, "-", "_" and "."
# (an international one in its xn-- form), or an IPv6 address in brackets.
_HOST = re.compile(r"[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]")
# A byte that was no UTF-8 in the variable or flag (Python's surrogateescape).
_UNDECODED = re.compile(r"[\udc80-\udcff]")
# A method as HTTP writes one (RFC 9110's token): echoed in Access-Control-Allow-Methods.
_METHOD = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Origins are separated as state keys are: by commas, white space, or both.
_SEPARATORS = re.compile(r"[\s,]+")


class CorsPolicy:
    """Which browser origins may call; the headers that tell the browser so."""

    def __init__(self, origins: Iterable[str]) -> None:
        self._origins = frozenset(normal_origin(origin) or origin for origin in origins)
        self._any = "*" in self._origins

    @property
    def enabled(self) -> bool:
        return bool(self._origins)

    def allows(self, origin: str | None) -> bool:
        """Whether ``origin`` (the request's ``Origin``, e.g. ``null``) is allowed."""
        if origin is None or not self._origins:
            return False  # none configured (the default): no Origin needs parsing
        return self._any or normal_origin(origin) in self._origins

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
        """Headers for the answer to a preflight ``OPTIONS``; no ``Allow-Origin`` if refused.

        An allowed origin may send any method, whether or not the path serves it
        (``methods``): a refused preflight shows the page only a CORS failure, while the
        request it lets through gets a 405 (or 404) the page can read, with its ErrorInfo.
        """
        headers = self.response_headers(origin)
        wanted = request_headers.get("Access-Control-Request-Method", "")
        if "Access-Control-Allow-Origin" in headers and _METHOD.fullmatch(wanted):
            headers.pop("Access-Control-Expose-Headers")
            allowed = list(methods)
            if wanted not in allowed:
                allowed.append(wanted)
            headers["Access-Control-Allow-Methods"] = ", ".join(allowed)
            headers["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
            headers["Access-Control-Max-Age"] = MAX_AGE_SECONDS
        else:
            headers.pop("Access-Control-Allow-Origin", None)
            headers.pop("Access-Control-Expose-Headers", None)
        return headers


def normal_origin(origin: str) -> str | None:
    """``origin`` as a browser sends it (lowercase scheme and host, no default port),
    or None when it is no http(s) origin. Browsers send ASCII (an international host in
    its ``xn--`` form): ``str.lower`` of anything else could match what it is not, as the
    Kelvin sign's "K" lowers to "k"."""
    if not origin.isascii():
        return None
    scheme, separator, rest = origin.partition("://")
    scheme = scheme.lower()
    if not separator or scheme not in _DEFAULT_PORTS:
        return None
    # A bracketed IPv6 address holds colons of its own: the port's comes after "]".
    split_at = rest.find(":", rest.rfind("]") + 1)
    host, port = (rest, "") if split_at < 0 else (rest[:split_at], rest[split_at + 1 :])
    if not _HOST.fullmatch(host) or not (split_at < 0 or port == "" or _PORT.fullmatch(port)):
        return None  # a path, query, user or white space: nothing a browser's Origin holds
    # Not str.isdigit, which takes "²", nor any length: int() refuses both, with a 500.
    number = int(port) if port else _DEFAULT_PORTS[scheme]  # "https://a.example:" too
    if not 0 < number < 65536:
        return None
    suffix = "" if number == _DEFAULT_PORTS[scheme] else f":{number}"
    return f"{scheme}://{host.lower()}{suffix}"


def is_preflight(request_headers: Mapping[str, str]) -> bool:
    """Whether a request's headers are a browser's CORS preflight's (an ``OPTIONS`` with
    both ``Origin`` and ``Access-Control-Request-Method``)."""
    return "Origin" in request_headers and "Access-Control-Request-Method" in request_headers


def parse_origins(text: str, quote: Callable[[str], str] = repr) -> tuple[str, ...]:
    """``"https://a.example, https://b.example"`` (or separated by white space, as state
    keys may be) -> the origins, as browsers send them; raises ``ValueError``, quoting
    the origin refused with ``quote``."""
    origins: list[str] = []
    for part in _SEPARATORS.split(text):
        origin = part.rstrip("/")
        if not origin:
            continue
        if origin == "*":
            origins.append(origin)
        elif (normal := normal_origin(origin)) is not None:
            origins.append(normal)
        else:
            hint = "" if origin.isascii() else " (a host beyond ASCII goes in its xn-- form)"
            if _UNDECODED.search(origin):  # bytes that were no UTF-8: no host at all
                hint = " (it holds bytes that are no UTF-8)"
            raise ValueError(
                f"must be an origin like https://example.com[:port], not {quote(origin)}{hint}"
            )
    return tuple(origins)
