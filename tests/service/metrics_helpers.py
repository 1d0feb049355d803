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
