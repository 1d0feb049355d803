"""The gateway's own inflating of gzip and deflate bodies (``service.content_coding``)."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import pytest

from service.content_coding import BodyCodingError, BodyTooLargeError, Inflater

LIMIT = 1 << 16
# 64 MiB of one byte: about 64 KB of gzip.
BOMB = gzip.compress(b" " * (64 << 20), compresslevel=9, mtime=0)


def inflate(coding: str, chunks: list[bytes], limit: int = LIMIT) -> bytes:
    inflater = Inflater(coding, limit)
    out = b"".join(inflater.feed(chunk) for chunk in chunks)
    inflater.finish()
    return out


@pytest.mark.parametrize("size", [1, 16 * 1024, len(BOMB)])
def test_a_bomb_is_refused_before_it_inflates_much_past_the_limit(size: int) -> None:
    """In chunks of any size; one chunk of the whole bomb included."""
    inflater = Inflater("gzip", LIMIT)
    inflated = 0
    with pytest.raises(BodyTooLargeError):
        for start in range(0, len(BOMB), size):
            out = inflater.feed(BOMB[start : start + size])
            inflated += len(out)
            assert inflated <= LIMIT
    assert inflated <= LIMIT


def test_a_bomb_in_one_chunk_is_never_inflated_whole() -> None:
    """docs/api.md, ``REQUEST_TOO_LARGE``: a gzip body is inflated only until it passes the
    limit, so the 64 MiB the bomb holds are never made, even when it comes in one chunk."""
    inflater = Inflater("gzip", LIMIT)
    tracemalloc.start()
    try:
        with pytest.raises(BodyTooLargeError):
            inflater.feed(BOMB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * LIMIT


def test_a_body_inflating_to_exactly_the_limit_is_taken() -> None:
    body = bytes(range(256)) * (LIMIT // 256)
    assert inflate("gzip", [gzip.compress(body)]) == body
    with pytest.raises(BodyTooLargeError):
        inflate("gzip", [gzip.compress(body + b"!")])


@pytest.mark.parametrize("wbits", [zlib.MAX_WBITS, -zlib.MAX_WBITS], ids=["zlib", "raw"])
def test_deflate_is_zlib_data_or_raw_deflate(wbits: int) -> None:
    body = b'{"config": {"players": 2}}'
    packer = zlib.compressobj(wbits=wbits)
    packed = packer.compress(body) + packer.flush()
    assert inflate("deflate", [packed[i : i + 3] for i in range(0, len(packed), 3)]) == body


@pytest.mark.parametrize(
    ("packed", "why"),
    [
        (b"{}", "incorrect header check"),
        (gzip.compress(b"{}", mtime=0)[:-1], "the body ends before its gzip data does"),
        (gzip.compress(b"{}", mtime=0) + b"\\n", "data follows the end of the gzip data"),
    ],
    ids=["not_gzip", "cut_short", "more_after_the_end"],
)
def test_what_is_not_whole_gzip_data_is_refused_saying_why(packed: bytes, why: str) -> None:
    with pytest.raises(BodyCodingError, match=why):
        inflate("gzip", [packed])


@pytest.mark.parametrize(
    ("coding", "packed"),
    [("gzip", gzip.compress(b"{}", mtime=0)), ("deflate", zlib.compress(b"{}"))],
)
def test_a_body_cut_short_is_refused_naming_its_coding(coding: str, packed: bytes) -> None:
    with pytest.raises(BodyCodingError, match=f"the body ends before its {coding} data does"):
        inflate(coding, [packed[:-1]])


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_data_of_the_other_coding_is_refused(coding: str) -> None:
    """docs/api.md, ``REQUEST_MALFORMED``: a body that is not the data its
    ``Content-Encoding`` names is refused; zlib data is no gzip body, nor gzip data a
    deflate body."""
    other = zlib.compress(b"{}") if coding == "gzip" else gzip.compress(b"{}", mtime=0)
    with pytest.raises(BodyCodingError):
        inflate(coding, [other])


def test_data_in_a_chunk_after_the_end_is_refused() -> None:
    with pytest.raises(BodyCodingError, match="data follows the end of the gzip data"):
        inflate("gzip", [gzip.compress(b"{}", mtime=0), b"more"])


def test_an_empty_body_is_empty() -> None:
    assert inflate("gzip", []) == b"" and inflate("deflate", [b""]) == b""


@pytest.mark.parametrize("coding", ["br", "x-gzip", "compress", "identity", "zstd"])
def test_only_gzip_and_deflate_are_inflated(coding: str) -> None:
    """docs/api.md, ``UNSUPPORTED_MEDIA_TYPE``: no other coding is read."""
    with pytest.raises(ValueError, match=coding):
        Inflater(coding, LIMIT)
