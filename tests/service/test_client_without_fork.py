"""The Python client imports and calls where Python has no ``os.fork`` and no
``os.register_at_fork``, as on native Windows, where grpcio has wheels and the client works
(clients/python/README.md): ``cardrules.client.aio`` registers its fork hook only where
Python has one (clients/python/src/cardrules/client/aio.py). A Python process of its own
deletes both before it imports the client, then makes one call with each client to the
real server on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLIENT_SOURCE = Path(__file__).resolve().parents[2] / "clients" / "python" / "src"

SCRIPT = """
import os
import sys

# What CPython on Windows lacks; threading and logging, imported later, check for it.
del os.register_at_fork
del os.fork

import asyncio

from cardrules.client import AsyncKrypkasinoClient, KrypkasinoClient

target = sys.argv[1]
with KrypkasinoClient(target, timeout=10) as client:
    print("sync", client.new_game(players=2).view.move_number, flush=True)


async def main() -> int:
    async with AsyncKrypkasinoClient(target, timeout=10) as client:
        return (await client.new_game(players=2)).view.move_number


print("async", asyncio.run(main()), flush=True)
"""


def test_the_client_imports_and_calls_without_fork_or_register_at_fork(
    grpc_target: str,
) -> None:
    """Before the guard, importing ``cardrules.client`` raised ``AttributeError: module
    'os' has no attribute 'register_at_fork'``."""
    path = os.pathsep.join(filter(None, (str(CLIENT_SOURCE), os.environ.get("PYTHONPATH"))))
    ran = subprocess.run(
        [sys.executable, "-c", SCRIPT, grpc_target],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert (ran.returncode, ran.stdout.splitlines()) == (0, ["sync 0", "async 0"]), ran.stderr
    assert "Traceback" not in ran.stderr, ran.stderr
