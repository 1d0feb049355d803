"""``cardrules_state_sealing``: how a server seals its state tokens, told by its metrics
(a security review: plain mode and an ephemeral key showed only in a start-up line)."""

from __future__ import annotations

import re

import pytest

from service.tokens import KeyRing
from tests.service.metrics_helpers import Samples, metric_samples
from tests.service.server_process import TEST_KEY, free_port, running

NEW_KEY = KeyRing.generate_key_text()


def sealing(found: Samples) -> list[tuple[str, str, float]]:
    return [
        (dict(labels)["mode"], dict(labels)["primary_key_id"], value)
        for (name, labels), value in found.items()
        if name == "cardrules_state_sealing"
    ]


@pytest.mark.parametrize("processes", [1, 2], ids=["one_process", "two_workers"])
@pytest.mark.parametrize(
    ("keys", "flags", "mode", "key_id"),
    [
        (f"{NEW_KEY},{TEST_KEY}", (), "keys", KeyRing.key_id(KeyRing.parse(NEW_KEY).keys[0]).hex()),
        (None, (), "ephemeral", "[0-9a-f]{8}"),
        (TEST_KEY, ("--plain-state",), "plain", ""),
    ],
    ids=["keys", "ephemeral", "plain"],
)
def test_the_metrics_say_how_the_server_seals_and_with_which_key(
    processes, keys, flags, mode, key_id
):
    args = ("--metrics-port", str(free_port()), *flags)
    if processes > 1:
        args += ("--workers", str(processes), "--grpc-port", str(free_port()))
    with running(args, keys=keys) as server:
        server.wait_for_logs("metrics")
        [(found_mode, found_id, value)] = sealing(metric_samples(server.metrics_url))
    assert (found_mode, value) == (mode, 1)
    assert re.fullmatch(key_id, found_id)
