"""The shipped alerts read series that exist (k8s/base/prometheusrule.yaml).

Each rule's ``expr`` of each overlay must parse as PromQL. Every series it reads
must be one a real ``cardrules serve`` exports, scraped after a game was started
and a move played so that the domain counters have samples, one of the short
list of kube-state-metrics' series, or Prometheus' own ``up``. Every label a
selector matches on, or an aggregation (``by``, ``without``) or vector match
(``on``, ``ignoring``) groups by, must be on each series read under it, and
every value a matcher names (each ``|`` alternative of a regex, negative
matchers included) must occur there. An expression must also be able to yield
something: the two sides of an operator must have series that match, and
``histogram_quantile`` needs ``le``. The alert table of docs/operations.md
lists the rules in order, with their severity and ``for``.
"""

from __future__ import annotations

import itertools
import operator
import re
from typing import Any

import grpc
import promql_parser
import pytest
from cardrules.client import KrypkasinoClient

from tests.deploy.manifests import OVERLAYS, ROOT, one, rendered
from tests.deploy.rendering import Manifest
from tests.service.metrics_helpers import Samples, metric_samples
from tests.service.server_process import free_port, running
from tests.service.test_seat_token_refusals_metric import after_rotation

Series = dict[str, dict[str, set[str]]]
"""Sample name (``_total``, ``_bucket`` ... included) -> label name -> the values seen."""

OPERATIONS = ROOT / "docs" / "operations.md"

# prometheus-operator's scrape configuration of a ServiceMonitor labels every series of
# a target with the target's namespace and pod (its "Default Labels": also service,
# container and endpoint, which no rule reads); the server exports neither. The
# kube-state-metrics series read here are about a namespace's objects, a pod's for
# kube_pod_container_status_restarts_total, and carry their own namespace and pod.
ADDED_AT_SCRAPE = frozenset({"namespace", "pod"})


def alert_rules(objects: list[Manifest]) -> list[dict[str, Any]]:
    spec = one(objects, "PrometheusRule")["spec"]
    return [rule for group in spec["groups"] for rule in group["rules"]]


RULES = [(overlay, rule) for overlay in OVERLAYS for rule in alert_rules(rendered(overlay))]


def kube_state_metrics_series(objects: list[Manifest]) -> Series:
    """The kube-state-metrics series the alerts may read (docs/operations.md), labelled
    as it labels them for this overlay's Deployment, HPA and pods' containers: a pod
    that is down exports nothing, so only kube-state-metrics can tell that no pod is
    ready or that one restarts before it can be scraped, and only it knows the HPA's
    replica counts."""
    deployment = one(objects, "Deployment")
    autoscaler = {
        "horizontalpodautoscaler": {one(objects, "HorizontalPodAutoscaler")["metadata"]["name"]}
    }
    containers = {c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]}
    return {
        "kube_deployment_status_replicas_available": {
            "deployment": {deployment["metadata"]["name"]}
        },
        "kube_horizontalpodautoscaler_status_current_replicas": autoscaler,
        "kube_horizontalpodautoscaler_spec_max_replicas": autoscaler,
        # Also uid (the pod's), which no rule reads.
        "kube_pod_container_status_restarts_total": {"container": containers, "uid": set()},
    }


def scrape_series(objects: list[Manifest]) -> Series:
    """The series Prometheus makes of each scrape itself: ``up``, whose ``job`` the
    prometheus-operator names after the Service the ServiceMonitor's endpoint scrapes."""
    monitor = one(objects, "ServiceMonitor")["spec"]
    selector = monitor["selector"]["matchLabels"].items()
    ports = {endpoint["port"] for endpoint in monitor["endpoints"]}
    jobs = {
        service["metadata"]["name"]
        for service in objects
        if service["kind"] == "Service"
        and selector <= service["metadata"].get("labels", {}).items()
        and ports & {port["name"] for port in service["spec"]["ports"]}
    }
    return {"up": {"job": jobs}}


def outside_series(objects: list[Manifest]) -> Series:
    """What the alerts may read besides the server's own series."""
    return kube_state_metrics_series(objects) | scrape_series(objects)


def exported(scraped: Samples) -> Series:
    found: Series = {}
    for name, labels in scraped:
        by_label = found.setdefault(name, {})
        for label, value in labels:
            by_label.setdefault(label, set()).add(value)
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
        return exported(metric_samples(server.metrics_url))


def selectors(node: promql_parser.Expr) -> list[promql_parser.VectorSelector]:
    """Every series selector under ``node``, those inside range selectors included."""
    found: list[promql_parser.VectorSelector] = []

    def visit(child: promql_parser.Expr) -> None:
        if isinstance(child, promql_parser.VectorSelector):
            found.append(child)

    promql_parser.walk(node, pre_visit=visit)
    return found


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
    """What a matcher names in vain: the value of an ``=`` or ``!=`` one, or an ``|``
    alternative of an ``=~`` or ``!~`` one, that no series has (a ``!=`` on a misspelt
    value excludes nothing, silently)."""
    if matcher.op in (promql_parser.MatchOp.Equal, promql_parser.MatchOp.NotEqual):
        return [] if matcher.value in values else [matcher.value]
    alternatives = matcher.value.split("|")
    return [a for a in alternatives if not any(re.fullmatch(a, seen) for seen in values)]


#: Aggregations that pick series and keep their labels; ``by`` only groups the picking.
_SELECTING = frozenset({"topk", "bottomk", "limitk", "limit_ratio"})


def output_labels(
    node: promql_parser.Expr, series: Series, found: list[str]
) -> frozenset[str] | None:
    """The label names of the vectors ``node`` yields (None for a scalar), adding to
    ``found`` what would make it yield nothing: a grouping or matching label no series
    under it has, two sides of an operator whose series cannot match, a
    ``histogram_quantile`` without ``le``."""
    if isinstance(node, promql_parser.NumberLiteral | promql_parser.StringLiteral):
        return None
    if isinstance(node, promql_parser.ParenExpr):
        return output_labels(node.expr, series, found)
    if isinstance(node, promql_parser.MatrixSelector):
        return output_labels(node.vector_selector, series, found)
    if isinstance(node, promql_parser.VectorSelector):
        return frozenset(series.get(node.name or "", {})) | ADDED_AT_SCRAPE
    if isinstance(node, promql_parser.Call):
        vectors = [v for a in node.args if (v := output_labels(a, series, found)) is not None]
        if node.func.name == "histogram_quantile":
            if "le" not in vectors[0]:
                found.append(f"{node}: histogram_quantile of series without le")
            return vectors[0] - {"le"}
        return vectors[0] if vectors else None
    if isinstance(node, promql_parser.AggregateExpr):
        inner = output_labels(node.expr, series, found) or frozenset()
        if node.modifier is None:
            return frozenset()
        named = frozenset(node.modifier.labels)
        for label in sorted(named - inner):
            found.append(f"{node}: no label {label} to group by")
        if str(node.op) in _SELECTING:
            return inner
        if node.modifier.type is promql_parser.AggModifierType.By:
            return named
        return inner - named
    assert isinstance(node, promql_parser.BinaryExpr), f"not checked yet: {node}"
    left = output_labels(node.lhs, series, found)
    right = output_labels(node.rhs, series, found)
    if left is None or right is None:
        return right if left is None else left
    matching = node.modifier.matching if node.modifier is not None else None
    if node.modifier is not None:
        assert not node.modifier.group_labels, "group_left/group_right are not checked yet"
    if matching is None:
        compared_left, compared_right = left, right
    else:
        named = frozenset(matching.labels)
        if matching.type is promql_parser.LabelModifierType.Include:  # on (...)
            for label in sorted(named - (left & right)):
                found.append(f"{node}: no label {label} to match on")
            compared_left = compared_right = named
        else:  # ignoring (...)
            compared_left, compared_right = left - named, right - named
    if compared_left != compared_right:
        found.append(
            f"{node}: the sides cannot match, labels {sorted(compared_left)} "
            f"against {sorted(compared_right)}"
        )
    return left


def problems(expr: str, series: Series) -> list[str]:
    """What ``expr`` reads that ``series`` lacks, and what makes it yield nothing; a
    syntax error raises ``ValueError``."""
    tree = promql_parser.parse(expr)
    found = [problem for s in selectors(tree) for problem in selector_problems(s, series)]
    output_labels(tree, series, found)
    return found


@pytest.mark.parametrize(
    ("overlay", "rule"), RULES, ids=[f"{overlay}:{rule['alert']}" for overlay, rule in RULES]
)
def test_each_alert_reads_only_series_and_labels_that_exist(overlay, rule, server_series):
    series = server_series | outside_series(rendered(overlay))
    assert problems(rule["expr"], series) == []


#: Where an annotation names a label of the alert, or prints its value.
_LABEL_IN_TEMPLATE = re.compile(r"\$labels\.(\w+)")
_RAW_VALUE = re.compile(r"\{\{-?\s*\$value\s*-?\}\}")


@pytest.mark.parametrize(
    ("overlay", "rule"), RULES, ids=[f"{overlay}:{rule['alert']}" for overlay, rule in RULES]
)
def test_each_alert_tells_what_it_found_with_the_labels_it_has(overlay, rule, server_series):
    """Every alert has a summary and a description; a ``$labels.x`` they name is a label
    the expression yields (else it prints empty), and ``$value`` is printed through a
    function: a ratio or an ``increase()`` is a float ("19093.333333333332 log lines")."""
    annotations = rule["annotations"]
    assert annotations.keys() == {"summary", "description"}
    series = server_series | outside_series(rendered(overlay))
    labels = output_labels(promql_parser.parse(rule["expr"]), series, [])
    assert labels is not None
    text = "\n".join(annotations.values())
    assert set(_LABEL_IN_TEMPLATE.findall(text)) <= labels, labels
    assert not _RAW_VALUE.search(text), text


#: The alerts about one pod, which must name it.
PER_POD = (
    "CardrulesLogLinesDropped",
    "CardrulesMetricsDown",
    "CardrulesStateNotSealed",
    "CardrulesPodRestarts",
)


@pytest.mark.parametrize("alert", PER_POD)
def test_an_alert_about_one_pod_names_it(alert, server_series):
    """Summed over a namespace, these said "2 pods" and left the on-call to find which."""
    rule = {r["alert"]: r for r in alert_rules(rendered("base"))}[alert]
    series = server_series | outside_series(rendered("base"))
    labels = output_labels(promql_parser.parse(rule["expr"]), series, [])
    assert labels is not None and {"namespace", "pod"} <= labels
    assert "{{ $labels.pod }}" in rule["annotations"]["description"]


def documented_alerts() -> list[tuple[str, str, str]]:
    """(alert, severity, for) of each row of the alert table in docs/operations.md."""
    table = OPERATIONS.read_text().split("\n| Alert |", 1)[1].split("\n\n", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()]
    return [(alert.strip("`"), severity, wait) for alert, _, severity, wait in rows[2:]]


def documented_metrics() -> dict[str, str]:
    """Each metric of the metrics table of docs/operations.md -> its labels cell."""
    table = OPERATIONS.read_text().split("\n| Metric |", 1)[1].split("\n\n", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()]
    return {name: labels for names, labels, _ in rows[2:] for name in re.findall(r"`(\w+)`", names)}


def test_the_operations_guide_documents_each_cardrules_metric_with_its_labels(server_series):
    """The guide's metrics table names every ``cardrules_*`` series a server exports, and
    each label of it (a label's values may follow it in parentheses)."""
    documented = documented_metrics()
    for name, labels in server_series.items():
        if not name.startswith("cardrules_"):
            continue
        assert name in documented, name
        cell = re.sub(r"\([^)]*\)", "", documented[name])
        if same := re.fullmatch(r"as `(\w+)`", cell):  # the labels of grpc_server_started_total
            cell = documented[f"grpc_server_{same[1]}_total"]
        assert set(re.findall(r"`(\w+)`", cell)) == set(labels), (name, cell)


def test_the_operations_guide_lists_the_alerts_in_their_order():
    """The guide tells how to patch a rule by its index, so the table keeps the rules' order."""
    shipped = alert_rules(rendered("base"))
    assert documented_alerts() == [(r["alert"], r["labels"]["severity"], r["for"]) for r in shipped]


#: A line that continues the query above it: indented, or led by a binary operator.
_CONTINUED = re.compile(r"\s|[-+*/<>=!^%]|(?:and|or|unless)\b")


def guide_queries() -> list[str]:
    """Each query of the ```promql blocks of docs/operations.md. A query begins at an
    unindented line that no operator leads; ``#`` lines and blank lines are no part of it."""
    queries: list[str] = []
    for block in re.findall(r"```promql\n(.*?)```", OPERATIONS.read_text(), re.DOTALL):
        for line in block.splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            if _CONTINUED.match(line):
                queries[-1] += "\n" + line
            else:
                queries.append(line)
    return queries


GUIDE_QUERIES = guide_queries()


def test_the_guide_has_queries():
    assert len(GUIDE_QUERIES) >= 7
    assert all(query.count("(") == query.count(")") for query in GUIDE_QUERIES), GUIDE_QUERIES


@pytest.mark.parametrize("query", GUIDE_QUERIES, ids=lambda query: query.split("\n", 1)[0])
def test_each_query_of_the_guide_reads_only_series_and_labels_that_exist(query, server_series):
    """The queries docs/operations.md gives to paste into Prometheus read what a server
    exports, as the alerts must."""
    assert problems(query, server_series) == []


@pytest.mark.parametrize("query", GUIDE_QUERIES, ids=lambda query: query.split("\n", 1)[0])
def test_each_query_of_the_guide_counts_per_namespace(query, server_series):
    """As the alerts do, so that pasting one never adds dev's calls to prod's."""
    labels = output_labels(promql_parser.parse(query), server_series, [])
    assert labels is not None and "namespace" in labels


API = ROOT / "docs" / "api.md"


def test_the_alert_api_md_names_for_stranded_games_counts_their_refusals():
    """docs/api.md, "Upgrades", named CardrulesServerErrors for the refusals of a newer
    release's tokens, which that alert stopped counting when Unavailable (their code)
    got an alert of its own; the sentence's alert must read that code, with its ``for``."""
    upgrades = API.read_text().split("\n## Upgrades\n", 1)[1].split("\n## ", 1)[0]
    sentence = " ".join(upgrades.split("**A rollback strands", 1)[1].split("\n- ", 1)[0].split())
    (alert,) = re.findall(r"`(Cardrules\w+)`", sentence)
    rule = {r["alert"]: r for r in alert_rules(rendered("base"))}[alert]
    assert 'grpc_code="Unavailable"' in rule["expr"]
    minutes = re.search(r"pass 1% of calls for (\d+) minutes", sentence)
    assert minutes is not None and rule["for"] == f"{minutes[1]}m", sentence
    assert "> 0.01" in rule["expr"]  # 1% of calls
    assert rule["labels"]["severity"] == "ticket"  # "a ticket, not a page"


def test_every_alert_the_docs_name_is_shipped():
    shipped = {rule["alert"] for rule in alert_rules(rendered("base"))}
    for path in (ROOT / "README.md", API, OPERATIONS):
        named = set(re.findall(r"\bCardrules[A-Z][A-Za-z]+\b", path.read_text()))
        assert named <= shipped, (path.name, named - shipped)


#: PromQL's comparison operators on two numbers.
_COMPARISONS = {
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_no_ready_pods_alert_fires_at_zero_available_and_only_then(overlay):
    """The checks above see what the outage alert reads, not when it fires: a mutation
    review found ``< 0`` for ``< 1``, which never fires, let through."""
    rule = {r["alert"]: r for r in alert_rules(rendered(overlay))}["CardrulesNoReadyPods"]
    expr = promql_parser.parse(rule["expr"])
    assert isinstance(expr, promql_parser.BinaryExpr)
    assert isinstance(expr.rhs, promql_parser.NumberLiteral)
    assert not (expr.modifier and expr.modifier.return_bool), f"bool: fires always: {expr}"
    fires = _COMPARISONS[str(expr.op).strip()]
    threshold = float(str(expr.rhs))
    assert fires(0, threshold), f"silent with no pod available: {expr}"
    assert not fires(1, threshold), f"fires with a pod available: {expr}"


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
        ("CardrulesServerErrors", "|DataLoss", "|DATA_LOSS", "never 'DATA_LOSS'"),
        ("CardrulesTokensFromNewerRelease", '"Unavailable"', '"UNAVAILABLE"', "never"),
        ("CardrulesSlowPlay", "(namespace, le)", "(namespace, grpc_metod, le)", "grpc_metod"),
        ("CardrulesSlowPlay", "(namespace, le)", "(namespace, el)", "no label el to group by"),
        ("CardrulesIllegalMovesSpike", "/ (", "/ on (game, reasn) (", "no label reasn"),
        ("CardrulesNoReadyPods", "deployment=", "deploy=", "no label deploy"),
        ("CardrulesLogLinesDropped", "lines_dropped_total", "lines_dropped", "no such series"),
        ("CardrulesNoReadyPods", '"cardrules"', '"card-rules"', "never 'card-rules'"),
        ("CardrulesSlowPlay", 'grpc_method="Play"', 'grpc_method!="Plya"', "never 'Plya'"),
        ("CardrulesMetricsDown", 'job="cardrules"', 'job="cardrules-headless"', "never"),
        ("CardrulesMetricsDown", "up{", "upp{", "no such series"),
        # Read what exists, yet never fire:
        ("CardrulesSlowPlay", "(namespace, le)", "(namespace)", "without le"),
        ("CardrulesServerErrors", "/ sum by (namespace, grpc_method) (", "/ sum (", "cannot match"),
        (
            "CardrulesServerErrors",
            "sum by (namespace, grpc_method) (rate(grpc_server_handled_total{",
            "sum by (namespace) (rate(grpc_server_handled_total{",
            "cannot match",
        ),
        ("CardrulesAtMaxReplicas", "horizontalpodautoscaler=", "hpa=", "no label hpa"),
        ("CardrulesStateNotSealed", 'mode!="keys"', 'mode!="sealed"', "never 'sealed'"),
        ("CardrulesAtMaxReplicas", "spec_max_replicas", "spec_max_replica", "no such series"),
        ("CardrulesAtMaxReplicas", '"cardrules"', '"cardrules-hpa"', "never 'cardrules-hpa'"),
        ("CardrulesStateTokensUnknownKey", "refused_total", "refused", "no such series"),
        ("CardrulesStateTokensUnknownKey", '"TOKEN_UNKNOWN_KEY"', '"UNKNOWN_KEY"', "never"),
        ("CardrulesStateTokensUnknownKey", "seat_tokens_refused", "seat_token_refused", "series"),
        (
            "CardrulesStateTokensUnknownKey",
            '"TOKEN_UNKNOWN_KEY"}[5m])))',
            '"SEAT_TOKEN_UNKNOWN_KEY"}[5m])))',
            "reason is never 'SEAT_TOKEN_UNKNOWN_KEY'",
        ),
        ("CardrulesDeadlinesExceeded", '"DeadlineExceeded"', '"DEADLINE_EXCEEDED"', "never"),
        ("CardrulesPodRestarts", "restarts_total", "restart_total", "no such series"),
        ("CardrulesPodRestarts", '"cardrules"', '"server"', "container is never 'server'"),
        ("CardrulesPodRestarts", "(namespace, pod)", "(namespace, pod, node)", "no label node"),
        ("CardrulesLogLinesDropped", "(namespace, pod)", "(namespace, pods)", "no label pods"),
        (
            "CardrulesStateTokensUnknownKey",
            "/ sum by (namespace) (",
            "/ sum by (namespace, grpc_method) (",
            "cannot match",
        ),
    ],
)
def test_a_misspelling_is_a_problem(alert, written, misspelt, expected, server_series):
    series = server_series | outside_series(rendered("base"))
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


# -- what the unknown-key alert counts ---------------------------------------------------


def selected(selector: promql_parser.VectorSelector, scraped: Samples) -> float:
    """The sum of the samples of ``scraped`` that ``selector`` picks (its name and its
    ``=``, ``!=``, ``=~`` and ``!~`` matchers)."""
    total = 0.0
    for (name, labels), value in scraped.items():
        found = dict(labels)
        if name != selector.name:
            continue
        picked = True
        for matcher in selector.matchers.matchers:
            if matcher.name in ADDED_AT_SCRAPE:
                continue
            seen = found.get(matcher.name, "")
            op = matcher.op
            if op is promql_parser.MatchOp.Equal:
                picked &= seen == matcher.value
            elif op is promql_parser.MatchOp.NotEqual:
                picked &= seen != matcher.value
            elif op is promql_parser.MatchOp.Re:
                picked &= re.fullmatch(matcher.value, seen) is not None
            else:
                picked &= re.fullmatch(matcher.value, seen) is None
        if picked:
            total += value
    return total


def test_the_unknown_key_alert_counts_seat_tokens_under_a_retired_key():
    """An SRE drill: after rotation step 3, a backend that had kept the renewed states but
    not the renewed seat tokens saw every old game refused PERMISSION_DENIED
    SEAT_TOKEN_INVALID, and the alert's numerator stayed 0. Its refusal counters, read
    from a real server's scrape as the rule selects them, now count each such call."""
    (expr,) = [
        rule["expr"]
        for rule in alert_rules(rendered("base"))
        if rule["alert"] == "CardrulesStateTokensUnknownKey"
    ]
    counters = [
        s for s in selectors(promql_parser.parse(expr)) if (s.name or "").endswith("_refused_total")
    ]
    assert {s.name for s in counters} == {
        "cardrules_state_tokens_refused_total",
        "cardrules_seat_tokens_refused_total",
    }
    state, seat, token = after_rotation()
    calls = 5
    with running(("--metrics-port", str(free_port()))) as server:
        server.wait_for_logs("metrics")
        with KrypkasinoClient(server.target) as client:
            for _ in range(calls):
                with pytest.raises(grpc.RpcError) as refusal:
                    client.legal_moves(state=state, seat=seat, seat_token=token)
                assert refusal.value.code() is grpc.StatusCode.PERMISSION_DENIED
        scraped = metric_samples(server.metrics_url)
    assert sum(selected(s, scraped) for s in counters) == calls
