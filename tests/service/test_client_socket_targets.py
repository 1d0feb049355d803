"""A Unix socket's target with an authority is refused at once by the client
(clients/python/src/cardrules/client/channel.py, ``check_target``): grpc took
``unix://tmp/x.sock`` (two slashes, ``tmp`` read as an authority) quietly and failed
every call with ``UNKNOWN: the target uri is not valid``."""

from __future__ import annotations

import re

import pytest
from cardrules.client import KrypkasinoClient
from cardrules.client.channel import check_target


@pytest.mark.parametrize(
    ("target", "advice"),
    [
        (
            "unix://tmp/x.sock",
            "'unix://tmp/x.sock' names an authority ('tmp'), which a unix: target takes none "
            "of: give unix:/ABSOLUTE/PATH or unix:///ABSOLUTE/PATH (three slashes), e.g. "
            "unix:///tmp/x.sock",
        ),
        ("UNIX://localhost/run/x.sock", "e.g. UNIX:///localhost/run/x.sock"),
        ("unix://tmp", "names an authority ('tmp')"),
        (
            "unix-abstract://name",
            "'unix-abstract://name' names an authority ('name'), which a unix-abstract: "
            "target takes none of: give unix-abstract:NAME, e.g. unix-abstract:name",
        ),
    ],
    ids=["unix-two-slashes", "unix-upper-case-host", "unix-authority-alone", "unix-abstract"],
)
def test_a_socket_target_with_an_authority_is_refused(target: str, advice: str) -> None:
    with pytest.raises(ValueError, match=re.escape(advice)):
        check_target(target)
    with pytest.raises(ValueError, match=re.escape(advice)):
        KrypkasinoClient(target)


@pytest.mark.parametrize(
    "target",
    ["unix:/p", "unix:///p", "unix:relative.sock", "unix-abstract:name", "UNIX:///p"],
)
def test_a_socket_target_without_an_authority_is_left_to_grpc(target: str) -> None:
    check_target(target)
    check_target(target, need_port=True)
    KrypkasinoClient(target).close()
