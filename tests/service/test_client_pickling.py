"""Neither client can be pickled, which passing one to a process pool does: the error says
to make the client in the worker, not grpc's "no default __reduce__ due to non-trivial
__cinit__" (clients/python/src/cardrules/client/channel.py, ``not_picklable``;
clients/python/README.md, "One client for the whole process")."""

from __future__ import annotations

import asyncio
import copy
import pickle
from multiprocessing.reduction import ForkingPickler

import pytest
from cardrules.client import AsyncKrypkasinoClient, KrypkasinoClient

WORKER = (
    r"create the client in the worker process that uses it "
    r"\(in a process pool, in the pool's initializer\)"
)


def test_a_blocking_client_refuses_pickling_and_says_to_make_it_in_the_worker(
    grpc_target: str,
) -> None:
    with KrypkasinoClient(grpc_target) as client:
        for dump in (pickle.dumps, ForkingPickler.dumps):  # the latter as a pool sends a task
            with pytest.raises(TypeError, match=f"^KrypkasinoClient cannot be pickled.*{WORKER}"):
                dump(client)
        with pytest.raises(TypeError, match=r"^KrypkasinoClient cannot be pickled or copied"):
            copy.copy(client)
        assert client.new_game(players=2).view.move_number == 0  # still serves this process


def test_an_asyncio_client_refuses_pickling_and_says_to_make_it_in_the_worker(
    grpc_target: str,
) -> None:
    async def run() -> int:
        async with AsyncKrypkasinoClient(grpc_target) as client:
            for dump in (pickle.dumps, ForkingPickler.dumps):
                with pytest.raises(
                    TypeError, match=f"^AsyncKrypkasinoClient cannot be pickled.*{WORKER}"
                ):
                    dump(client)
            return (await client.new_game(players=2)).view.move_number

    assert asyncio.run(run()) == 0
