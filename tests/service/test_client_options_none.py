"""``options=None`` means no extra channel options, as omitting it does and as grpc's own
``options=None`` does, like the clients' other ``None`` settings (``credentials``,
``load_balancing``): clients/python/src/cardrules/client/sync.py and aio.py."""

from __future__ import annotations

import asyncio

import grpc
from cardrules.client import AsyncKrypkasinoClient, KrypkasinoClient, channel_options


def test_channel_options_take_none_as_no_extra_options() -> None:
    assert channel_options("round_robin", None) == channel_options("round_robin")
    assert channel_options(None, None) == channel_options()


def test_the_blocking_client_with_options_none_plays_against_a_real_server(
    grpc_target: str,
) -> None:
    with KrypkasinoClient(grpc_target, options=None) as client:
        game = client.new_game(players=2, seed=48)
        assert game.view.move_number == 0
        assert client.get_view(state=game.state).view.state_id == game.view.state_id


def test_the_asyncio_client_with_options_none_plays_against_a_real_server(
    grpc_target: str,
) -> None:
    async def play() -> tuple[str, str]:
        async with AsyncKrypkasinoClient(grpc_target, options=None) as client:
            game = await client.new_game(players=2, seed=48)
            again = await client.get_view(state=game.state)
            return game.view.state_id, again.view.state_id

    made, read = asyncio.run(play())
    assert made == read != ""


def test_options_none_beside_a_given_channel_is_no_channel_setting(grpc_target: str) -> None:
    """Only real settings conflict with a given channel: None is none."""
    with grpc.insecure_channel(grpc_target, channel_options()) as channel:
        client = KrypkasinoClient(channel=channel, options=None)
        assert client.new_game(players=2, seed=48).view.game_id
