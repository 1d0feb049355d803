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
