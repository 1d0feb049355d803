"""Reading a Prometheus exposition in tests: from a registry's text or a server's /metrics."""

from __future__ import annotations

import urllib.request

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from service.krypkasino_api import GAME

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
"""Sample name (``_total``, ``_bucket`` ... included) and its labels -> value."""


def samples(text: str) -> Samples:
    """Every sample of an exposition, keyed by (sample name, labels)."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def by_reason(found: Samples, name: str) -> dict[str, float]:
    """The series of ``name``, a Krypkasino counter by ``game`` and ``reason`` (a
    ``*_tokens_refused_total``): reason -> count."""
    counts = {}
    for (sample, labels), count in found.items():
        if sample == name:
            by_name = dict(labels)
            assert by_name.keys() == {"game", "reason"}
            assert by_name["game"] == GAME
            counts[by_name["reason"]] = count
    return counts


def counted_by_reason(registry: CollectorRegistry, name: str) -> dict[str, float]:
    """``by_reason`` of what ``registry`` holds now."""
    return by_reason(samples(generate_latest(registry).decode()), name)


def metric_samples(url: str) -> Samples:
    """Every sample a ``/metrics`` endpoint serves now."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        return samples(answer.read().decode())


def handled(metrics_url: str, method: str, code: str) -> float:
    """``grpc_server_handled_total`` of a Krypkasino ``method`` that ended with ``code``."""
    return rpc_sample(metrics_url, "grpc_server_handled_total", method, grpc_code=code)


def rpc_sample(metrics_url: str, name: str, method: str, **labels: str) -> float:
    """The sample ``name`` of a Krypkasino unary ``method`` with ``labels`` besides."""
    wanted = {
        "grpc_service": "cardrules.krypkasino.v1.KrypkasinoService",
        "grpc_method": method,
        "grpc_type": "unary",
        **labels,
    }
    return sum(
        value
        for (sample, found), value in metric_samples(metrics_url).items()
        if sample == name and dict(found) == wanted
    )
