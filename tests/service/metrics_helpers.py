"""Reading a Prometheus exposition in tests: from a registry's text or a server's /metrics."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
"""Sample name (``_total``, ``_bucket`` ... included) and its labels -> value."""


def samples(text: str) -> Samples:
    """Every sample of an exposition, keyed by (sample name, labels)."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def metric_samples(url: str) -> Samples:
    """Every sample a ``/metrics`` endpoint serves now."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        return samples(answer.read().decode())


def handled(metrics_url: str, method: str, code: str) -> float:
    """``grpc_server_handled_total`` of a Krypkasino ``method`` that ended with ``code``."""
    wanted = {
        "grpc_service": "cardrules.krypkasino.v1.KrypkasinoService",
        "grpc_method": method,
        "grpc_code": code,
        "grpc_type": "unary",
    }
    return sum(
        value
        for (name, labels), value in metric_samples(metrics_url).items()
        if name == "grpc_server_handled_total" and dict(labels) == wanted
    )
