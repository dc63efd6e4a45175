"""deploy/: the Grafana dashboard and the Prometheus rules parse, and every PromQL expression
in them names only metrics the exporter serves (exporter.families, which a scrape of a
publication serves in full: tests/exporter/test_server.py), and `promtool check` accepts them
(Debian's prometheus package; CI installs it)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from exporter.families import served_names
from tests.support.deploy_files import DASHBOARD, ROOT, RULES

# PromQL words that are not metric names: aggregations, functions, operators, modifiers.
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}
KEYWORDS |= {"group_left", "group_right", "inf", "nan"}
FUNCTIONS = {
    *("sum", "min", "max", "avg", "count", "topk", "bottomk", "quantile", "stddev"),
    *("absent", "absent_over_time", "time", "vector", "scalar", "rate", "increase"),
    *("delta", "deriv", "changes", "resets", "clamp_min", "clamp_max", "abs", "round"),
    *("max_over_time", "min_over_time", "avg_over_time", "last_over_time", "label_values"),
    *("label_replace", "sort", "sort_desc", "timestamp", "present_over_time"),
}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or Grafana's label_values(...)) selects."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings (label values)
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors
    # label lists: by (a, b), on (pipeline), group_left (declared) and label_values's 2nd arg
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1 ()", text)
    text = re.sub(r"\blabel_values\s*\(([^,()]*),[^)]*\)", r"label_values(\1)", text)
    names = set()
    pattern = r"(?<![\w.$])([a-zA-Z_:][\w:]*)(\s*\(|\s+(?:by|without)\b)?"
    for match in re.finditer(pattern, text):
        word, call = match[1], match[2]  # a call, or an aggregation: `max by (x) (...)`
        if call:
            assert word in FUNCTIONS | KEYWORDS, f"unknown function {word} in {expr!r}"
        elif word not in KEYWORDS:
            names.add(word)
    return names


def test_metric_names_sees_through_promql() -> None:
    expr = (
        '(dgm_a{pipeline=~"$p"} == 0) * on (pipeline) group_left (declared) dgm_b_info '
        "or max by (topic_name) (rate(dgm_c[5m] offset 1h)) > 1e3 and time() - dgm_d"
    )
    assert metric_names(expr) == {"dgm_a", "dgm_b_info", "dgm_c", "dgm_d"}
    assert metric_names("label_values(dgm_e, pipeline)") == {"dgm_e"}
    assert metric_names("absent(up)") == {"up"}


def dashboard_exprs(node: Any) -> Iterator[str]:
    """Every `expr` of a panel target and every templating query, anywhere in the JSON."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            elif key == "query" and isinstance(value, dict) and "query" in value:
                yield str(value["query"])
            else:
                yield from dashboard_exprs(value)
    elif isinstance(node, list):
        for item in node:
            yield from dashboard_exprs(item)


def rule_exprs() -> list[str]:
    document = yaml.safe_load(RULES.read_text())
    return [rule["expr"] for group in document["groups"] for rule in group["rules"]]


def test_grafana_dashboard_is_a_dashboard_over_the_provisioned_prometheus() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len(panels) >= 8
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    for panel in panels:
        assert panel["datasource"]["type"] == "prometheus", panel["title"]
        assert panel["targets"], f"{panel['title']} has no query"
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        assert [t["refId"] for t in panel["targets"]] == [
            chr(65 + i) for i in range(len(panel["targets"]))
        ]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"


def test_every_promql_names_only_served_metrics() -> None:
    served = served_names()
    dashboard = list(dashboard_exprs(json.loads(DASHBOARD.read_text())))
    rules = rule_exprs()
    assert len(dashboard) >= 15 and len(rules) >= 5
    for expr in dashboard + rules:
        names = metric_names(expr)
        assert names, f"no metric in {expr!r}"
        assert names <= served, f"{expr!r} names {sorted(names - served)}, not served"


def test_rules_cover_down_stale_violated_and_lso_lag() -> None:
    document = yaml.safe_load(RULES.read_text())
    rules = {rule["alert"]: rule for group in document["groups"] for rule in group["rules"]}
    assert re.fullmatch(r"absent\(dgm_\w+\)", rules["DgmDown"]["expr"])
    assert "dgm_last_analysis_timestamp_seconds" in rules["DgmAnalysisStale"]["expr"]
    assert "dgm_pipeline_meets_declared == 0" in rules["DgmVerdictViolated"]["expr"]
    assert "dgm_analysis_stale_after_seconds" in rules["DgmAnalysisStale"]["expr"]
    assert "dgm_topic_max_lso_lag" in rules["DgmLsoLagHigh"]["expr"]
    # Alerts on analysis counts read the last closed window, whose series clears.
    assert "_last_window_" in rules["DgmAbortedReads"]["expr"]
    for name, rule in rules.items():
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert rule["annotations"]["summary"], name
        assert re.fullmatch(r"\d+[smh]", rule.get("for", "0m")), name


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation but '-' and '_'
    dropped, spaces as '-'; a repeated one gets -1, -2, ..."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", markdown, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in found:
            n += 1
            anchor = f"{slug}-{n}"
        found.add(anchor)
    return found


def test_github_anchors_are_githubs() -> None:
    page = "# Runbook: dgm's alerts\n## DgmDown\n### The `[cluster]` table\n## DgmDown\n"
    assert github_anchors(page) == {
        "runbook-dgms-alerts",
        "dgmdown",
        "the-cluster-table",
        "dgmdown-1",
    }


def test_every_rule_has_a_runbook_section_that_exists() -> None:
    document = yaml.safe_load(RULES.read_text())
    for group in document["groups"]:
        for rule in group["rules"]:
            url = rule["annotations"].get("runbook_url", "")
            path, _, anchor = url.partition("#")
            assert path == "docs/runbook.md" and anchor, f"{rule['alert']}: runbook_url {url!r}"
            page = ROOT / path
            assert anchor in github_anchors(page.read_text()), f"{url}: no such section"
            assert anchor == rule["alert"].lower(), f"{rule['alert']} points at {url}"


def test_promtool_accepts_the_rules_and_the_scrape_config(tmp_path: Path, promtool: str) -> None:
    checked = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rule_exprs())} rules found" in checked.stdout
    # The config names the rules where compose mounts them; point it at the repository's.
    config = yaml.safe_load((RULES.parent / "prometheus.yml").read_text())
    config["rule_files"] = [str(RULES)]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    checked = subprocess.run(
        [promtool, "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
