"""Request bodies sent gzip- or deflate-encoded (``Content-Encoding``), inflated by the gateway.

aiohttp would inflate them itself, as they arrive, and go on inflating what
is left of a body after the gateway has refused it early (413, 415, 404:
aiohttp reads and drops the rest for up to 10 s before it closes the
connection, so that the client reads the answer rather than a reset). A
megabyte of gzip holds a gigabyte of JSON, so one such request cost the
server seconds of CPU on the event loop that gRPC shares. The gateway takes
the bytes as they came instead, and inflates only until the body passes its
limit; the rest aiohttp drops unread.
"""

from __future__ import annotations

import zlib

CODINGS = frozenset({"gzip", "deflate"})
# RFC 9110, 8.4.1.3: a recipient SHOULD consider "x-gzip" equivalent to "gzip" (older
# clients and proxies still send it). Never advertised: Accept-Encoding names gzip.
_ALIASES = {"x-gzip": "gzip"}
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_DEFLATE_WBITS = -zlib.MAX_WBITS


def canonical_coding(name: str) -> str:
    """The coding ``name`` (lower case) stands for: ``gzip`` for ``x-gzip`` (RFC 9110,
    8.4.1.3), else ``name`` itself."""
    return _ALIASES.get(name, name)


class BodyTooLargeError(Exception):
    """The body inflates to more than the limit."""


class BodyCodingError(Exception):
    """The body is not what its ``Content-Encoding`` says; the text says why (no body bytes)."""


class Inflater:
    """Inflates one body of ``coding`` (``gzip`` or ``deflate``) chunk by chunk, never past
    ``limit`` bytes of output."""

    def __init__(self, coding: str, limit: int) -> None:
        if coding not in CODINGS:
            raise ValueError(f"not a coding the gateway inflates: {coding!r}")
        self._coding = coding
        self._limit = limit
        self._size = 0
        self._stream: zlib._Decompress | None = None

    def feed(self, chunk: bytes) -> bytes:
        """What ``chunk`` inflates to; raises ``BodyTooLargeError`` once past the limit."""
        if not chunk:
            return b""
        if self._stream is None:
            self._stream = zlib.decompressobj(self._wbits(chunk[0]))
        elif self._stream.eof:
            raise BodyCodingError(self._more_after_the_end())
        # At most one byte past the limit: that is enough to refuse, and a chunk of a
        # few kilobytes can inflate to many megabytes.
        try:
            out = self._stream.decompress(chunk, self._limit - self._size + 1)
        except zlib.error as error:
            # "Error -3 while decompressing data: incorrect header check": zlib's why alone.
            raise BodyCodingError(str(error).rpartition(": ")[2]) from None
        self._size += len(out)
        if self._size > self._limit:
            raise BodyTooLargeError
        if self._stream.unused_data:
            raise BodyCodingError(self._more_after_the_end())
        return out

    def finish(self) -> None:
        """The body has ended: raises ``BodyCodingError`` if its compressed data has not."""
        if self._stream is not None and not self._stream.eof:
            raise BodyCodingError(f"the body ends before its {self._coding} data does")

    def _more_after_the_end(self) -> str:
        # A gzip file may hold several members; no HTTP client sends a body of them.
        several = " (a gzip body of several members is not read)" if self._coding == "gzip" else ""
        return f"data follows the end of the {self._coding} data{several}"

    def _wbits(self, first: int) -> int:
        if self._coding == "gzip":
            return _GZIP_WBITS
        # RFC 9110's deflate is zlib data, but some clients send raw deflate, as aiohttp
        # (and browsers reading responses) allow: zlib data starts with method 8.
        return _ZLIB_WBITS if first & 0x0F == 8 else _RAW_DEFLATE_WBITS
