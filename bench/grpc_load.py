"""A load generator for ``bench.grpc``: concurrent raw unary calls for a fixed time.

Requests are pre-serialized bytes and responses are not parsed, so the
client costs the same whichever method it calls. Run as
``python -m bench.grpc_load TARGET METHOD REQUESTS_FILE CONCURRENCY SECONDS CHANNELS``;
prints one JSON object: calls, seconds, failures and latency samples (ns).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import grpc


async def load(
    target: str, method: str, requests: list[bytes], concurrency: int, seconds: float, channels: int
) -> dict[str, object]:
    # A local subchannel pool per channel gives each its own connection, so
    # SO_REUSEPORT can spread them over worker processes.
    pool = [
        grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
        for _ in range(channels)
    ]
    calls: list[grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]] = [
        channel.unary_unary(method) for channel in pool
    ]
    latencies: list[int] = []
    failures: dict[str, int] = {}
    deadline = time.perf_counter() + seconds

    async def worker(index: int) -> None:
        call = calls[index % len(calls)]
        i = index
        while time.perf_counter() < deadline:
            request = requests[i % len(requests)]
            i += concurrency
            started = time.perf_counter_ns()
            try:
                await call(request, timeout=10)
            except grpc.aio.AioRpcError as error:
                failures[error.code().name] = failures.get(error.code().name, 0) + 1
                continue
            latencies.append(time.perf_counter_ns() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - started
    for channel in pool:
        await channel.close()
    return {"calls": len(latencies), "seconds": elapsed, "failures": failures, "ns": latencies}


def write_requests(requests: list[bytes]) -> Path:
    """A temporary file of ``requests`` as length-prefixed records; the caller removes it."""
    with tempfile.NamedTemporaryFile(prefix="cardrules-bench-", delete=False) as handle:
        for request in requests:
            handle.write(len(request).to_bytes(4, "big") + request)
    return Path(handle.name)


def read_requests(path: Path) -> list[bytes]:
    """The requests ``write_requests`` wrote."""
    blob = path.read_bytes()
    requests = []
    offset = 0
    while offset < len(blob):
        size = int.from_bytes(blob[offset : offset + 4], "big")
        requests.append(blob[offset + 4 : offset + 4 + size])
        offset += 4 + size
    return requests


def main() -> None:
    target, method, path, concurrency, seconds, channels = sys.argv[1:7]
    result = asyncio.run(
        load(
            target,
            method,
            read_requests(Path(path)),
            int(concurrency),
            float(seconds),
            int(channels),
        )
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
