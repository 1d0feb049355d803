"""The shipped alerts read series that exist (k8s/base/prometheusrule.yaml, issue 5).

Each rule's ``expr`` of each overlay must parse as PromQL. Every series it reads
must be one a real ``cardrules serve`` exports, scraped after a game was started
and a move played so that the domain counters have samples, or one of the short
list of kube-state-metrics' series. Every label a selector matches on, or an
aggregation (``by``, ``without``) or vector match (``on``, ``ignoring``) groups
by, must be on each series read under it, and every value an ``=`` or ``=~``
matcher asks for (each ``|`` alternative of a regex) must occur there. The
alert table of docs/operations.md lists the rules in order, with their
severity and ``for``.
"""

from __future__ import annotations

import itertools
import re
import urllib.request
from typing import Any

import promql_parser
import pytest
from cardrules.client import KrypkasinoClient
from prometheus_client.parser import text_string_to_metric_families

from tests.deploy.kustomize import Manifest
from tests.deploy.manifests import OVERLAYS, ROOT, one, rendered
from tests.service.server_process import free_port, running

Series = dict[str, dict[str, set[str]]]
"""Sample name (``_total``, ``_bucket`` ... included) -> label name -> the values seen."""

OPERATIONS = ROOT / "docs" / "operations.md"

# Prometheus adds it to every series it scrapes through the ServiceMonitor (the
# target's namespace); kube-state-metrics exports it itself. The server does not.
ADDED_AT_SCRAPE = frozenset({"namespace"})


def alert_rules(objects: list[Manifest]) -> list[dict[str, Any]]:
    spec = one(objects, "PrometheusRule")["spec"]
    return [rule for group in spec["groups"] for rule in group["rules"]]


RULES = [(overlay, rule) for overlay in OVERLAYS for rule in alert_rules(rendered(overlay))]


def kube_state_metrics_series(objects: list[Manifest]) -> Series:
    """The kube-state-metrics series the alerts may read (docs/operations.md), labelled
    as it labels them for this overlay's Deployment: a pod that is down exports
    nothing, so only kube-state-metrics can tell that no pod is ready."""
    deployment = one(objects, "Deployment")["metadata"]["name"]
    return {"kube_deployment_status_replicas_available": {"deployment": {deployment}}}


def exported(exposition: str) -> Series:
    found: Series = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            labels = found.setdefault(sample.name, {})
            for name, value in sample.labels.items():
                labels.setdefault(name, set()).add(value)
    return found


@pytest.fixture(scope="module")
def server_series() -> Series:
    with running(("--metrics-port", str(free_port()))) as server:
        server.wait_for_logs("metrics")
        with KrypkasinoClient(server.target) as client:
            game = client.new_game(players=2, seed=1)
            seat = game.view.turn
            token = game.seat_tokens[seat]
            move = client.legal_moves(state=game.state, seat=seat, seat_token=token).moves[0]
            client.play(state=game.state, seat=seat, seat_token=token, move=move)
        with urllib.request.urlopen(server.metrics_url, timeout=10) as answer:
            return exported(answer.read().decode())


def selectors(node: promql_parser.Expr) -> list[promql_parser.VectorSelector]:
    """Every series selector under ``node``, those inside range selectors included."""
    found: list[promql_parser.VectorSelector] = []

    def visit(child: promql_parser.Expr) -> None:
        if isinstance(child, promql_parser.VectorSelector):
            found.append(child)

    promql_parser.walk(node, pre_visit=visit)
    return found


def grouping_labels(node: promql_parser.Expr) -> list[str]:
    """The labels an aggregation's ``by``/``without`` or a vector match's ``on``/``ignoring``
    names (``group_left``/``group_right`` labels are refused: nothing checks them yet)."""
    if isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
        return node.modifier.labels
    if isinstance(node, promql_parser.BinaryExpr) and node.modifier is not None:
        assert not node.modifier.group_labels, "group_left/group_right labels are not checked"
        if node.modifier.matching is not None:
            return node.modifier.matching.labels
    return []


def selector_problems(selector: promql_parser.VectorSelector, series: Series) -> list[str]:
    name = selector.name
    if name is None or name not in series:
        return [f"{selector}: no such series"]
    found = []
    matchers = selector.matchers
    for matcher in itertools.chain(matchers.matchers, *matchers.or_matchers):
        if matcher.name in ADDED_AT_SCRAPE:
            continue
        values = series[name].get(matcher.name)
        if values is None:
            found.append(f"{name}: no label {matcher.name}")
            continue
        for value in missing_values(matcher, values):
            found.append(f"{name}: {matcher.name} is never {value!r}")
    return found


def missing_values(matcher: promql_parser.Matcher, values: set[str]) -> list[str]:
    """What an ``=`` matcher, or each ``|`` alternative of an ``=~`` one, asks for in vain."""
    if matcher.op is promql_parser.MatchOp.Equal:
        return [] if matcher.value in values else [matcher.value]
    if matcher.op is promql_parser.MatchOp.Re:
        alternatives = matcher.value.split("|")
        return [a for a in alternatives if not any(re.fullmatch(a, seen) for seen in values)]
    return []


def problems(expr: str, series: Series) -> list[str]:
    """What ``expr`` reads that ``series`` lacks; a syntax error raises ``ValueError``."""
    tree = promql_parser.parse(expr)
    found = [problem for s in selectors(tree) for problem in selector_problems(s, series)]

    def visit(node: promql_parser.Expr) -> None:
        for label in set(grouping_labels(node)) - ADDED_AT_SCRAPE:
            for selector in selectors(node):
                name = selector.name
                if name in series and label not in series[name]:
                    found.append(f"{name}: no label {label} to group by")

    promql_parser.walk(tree, pre_visit=visit)
    return found


@pytest.mark.parametrize(
    ("overlay", "rule"), RULES, ids=[f"{overlay}:{rule['alert']}" for overlay, rule in RULES]
)
def test_each_alert_reads_only_series_and_labels_that_exist(overlay, rule, server_series):
    series = server_series | kube_state_metrics_series(rendered(overlay))
    assert problems(rule["expr"], series) == []


def documented_alerts() -> list[tuple[str, str, str]]:
    """(alert, severity, for) of each row of the alert table in docs/operations.md."""
    table = OPERATIONS.read_text().split("\n| Alert |", 1)[1].split("\n\n", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()]
    return [(alert.strip("`"), severity, wait) for alert, _, severity, wait in rows[2:]]


def test_the_operations_guide_lists_the_alerts_in_their_order():
    """The guide tells how to patch a rule by its index, so the table keeps the rules' order."""
    shipped = alert_rules(rendered("base"))
    assert documented_alerts() == [(r["alert"], r["labels"]["severity"], r["for"]) for r in shipped]


# -- the checks can fail -----------------------------------------------------------------

BASE_RULES = {rule["alert"]: rule["expr"] for rule in alert_rules(rendered("base"))}


@pytest.mark.parametrize(
    ("alert", "written", "misspelt", "expected"),
    [
        ("CardrulesServerErrors", "handled_total{", "handled{", "no such series"),
        ("CardrulesSlowPlay", "seconds_bucket", "seconds", "no such series"),
        ("CardrulesIllegalMovesSpike", "cardrules_moves_total", "cardrules_move_total", "series"),
        ("CardrulesServerErrors", "grpc_service=", "grpc_servce=", "no label grpc_servce"),
        ("CardrulesSlowPlay", '"Play"', '"play"', "grpc_method is never 'play'"),
        ("CardrulesServerErrors", "|DataLoss|", "|DATA_LOSS|", "never 'DATA_LOSS'"),
        ("CardrulesSlowPlay", "(namespace, le)", "(namespace, grpc_metod, le)", "grpc_metod"),
        ("CardrulesSlowPlay", "(namespace, le)", "(namespace, el)", "no label el to group by"),
        ("CardrulesIllegalMovesSpike", "/ (", "/ on (game, reasn) (", "no label reasn"),
        ("CardrulesNoReadyPods", "deployment=", "deploy=", "no label deploy"),
        ("CardrulesNoReadyPods", '"cardrules"', '"card-rules"', "never 'card-rules'"),
    ],
)
def test_a_misspelling_is_a_problem(alert, written, misspelt, expected, server_series):
    series = server_series | kube_state_metrics_series(rendered("base"))
    assert written in BASE_RULES[alert]
    found = problems(BASE_RULES[alert].replace(written, misspelt, 1), series)
    assert any(expected in problem for problem in found), found


def test_a_promql_syntax_error_raises():
    with pytest.raises(ValueError, match="parenthesis"):
        problems(BASE_RULES["CardrulesServerErrors"].replace("[5m]))", "[5m])", 1), {})


def test_only_production_pages():
    """The dev overlay turns its paging alerts into tickets; prod keeps the base's."""

    def severities(overlay: str) -> dict[str, str]:
        return {r["alert"]: r["labels"]["severity"] for r in alert_rules(rendered(overlay))}

    assert set(severities("overlays/dev").values()) == {"ticket"}
    assert severities("overlays/prod") == severities("base")
    assert "page" in severities("base").values()
