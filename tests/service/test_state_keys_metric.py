"""``cardrules_state_keys`` and the ``listening`` line's ``key_ids``: every key a server
opens with. An SRE drill found that only the primary key showed (``cardrules_state_sealing``),
so a pod on ``NEW,OLD`` and one on ``NEW`` alone, which refuses every token still under
OLD, looked the same in the metrics and the logs."""

from __future__ import annotations

import pytest

from service.tokens import KeyRing
from tests.service.metrics_helpers import Samples, metric_samples
from tests.service.server_process import TEST_KEY, free_port, free_ports, running

NEW_KEY = KeyRing.generate_key_text()


def key_id(text: str) -> str:
    return KeyRing.key_id(KeyRing.parse(text).keys[0]).hex()


def state_keys(found: Samples) -> dict[tuple[str, str], float]:
    """``cardrules_state_keys``: (key_id, role) -> value."""
    keys = {}
    for (name, labels), value in found.items():
        if name == "cardrules_state_keys":
            by_name = dict(labels)
            assert by_name.keys() == {"key_id", "role"}
            keys[by_name["key_id"], by_name["role"]] = value
    return keys


def primary_key_id(found: Samples) -> str:
    [primary] = [
        dict(labels)["primary_key_id"]
        for (name, labels), _ in found.items()
        if name == "cardrules_state_sealing"
    ]
    return primary


@pytest.mark.parametrize("processes", [1, 2], ids=["one_process", "two_workers"])
@pytest.mark.parametrize("flags", [(), ("--plain-state",)], ids=["keys", "plain"])
def test_the_metrics_and_the_listening_line_name_every_key(processes, flags):
    """Two keys, the new one first: both are exported, the first as primary, and each
    process's listening line lists them in that order. In plain mode too: its keys still
    open sealed tokens and sign seat tokens."""
    metrics_port, grpc_port = free_ports(2)  # two draws of free_port() may be equal
    args = ("--metrics-port", str(metrics_port), *flags)
    if processes > 1:
        args += ("--workers", str(processes), "--grpc-port", str(grpc_port))
    new, old = key_id(NEW_KEY), key_id(TEST_KEY)
    with running(args, keys=f"{NEW_KEY},{TEST_KEY}") as server:
        server.wait_for_logs("metrics")
        server.wait_for_logs("listening", count=processes)
        found = metric_samples(server.metrics_url)
        listening = server.log_events("listening")
    assert state_keys(found) == {(new, "primary"): 1, (old, "opening"): 1}
    assert len(listening) == processes
    assert [line["key_ids"] for line in listening] == [[new, old]] * processes


def test_a_pod_with_one_key_differs_from_one_with_two_though_both_seal_alike():
    """The drill's case: ``NEW`` alone against ``NEW,OLD``; the primary key is the same."""
    found = {}
    for keys in (NEW_KEY, f"{NEW_KEY},{TEST_KEY}"):
        with running(("--metrics-port", str(free_port())), keys=keys) as server:
            server.wait_for_logs("metrics")
            found[keys] = metric_samples(server.metrics_url)
    alone, both = found.values()
    assert primary_key_id(alone) == primary_key_id(both) == key_id(NEW_KEY)
    assert set(state_keys(alone)) == {(key_id(NEW_KEY), "primary")}
    assert set(state_keys(both)) == {(key_id(NEW_KEY), "primary"), (key_id(TEST_KEY), "opening")}


def test_an_ephemeral_key_is_named_as_the_primary():
    with running(("--metrics-port", str(free_port())), keys=None) as server:
        server.wait_for_logs("metrics")
        found = metric_samples(server.metrics_url)
        [listening] = server.log_events("listening")
    made_up = primary_key_id(found)
    assert state_keys(found) == {(made_up, "primary"): 1}
    assert listening["key_ids"] == [made_up]
