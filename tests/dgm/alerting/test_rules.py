"""Alert rules: [[alerts]] in dgm.toml through the config loader, and validate_rule for the page."""

from __future__ import annotations

from pathlib import Path

import pytest

from dgm.alerting.rules import holds, matches, merge_rules, rule_to_dict, validate_rule
from dgm.config.alerts import AlertRule
from dgm.config.loader import load_config
from dgm.config.problems import ConfigError

RULE = """
[[alerts]]
name = "{name}"
metric = "{metric}"
scope = "{scope}"
comparison = ">"
threshold = {threshold}
"""


@pytest.fixture(autouse=True)
def _no_env_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DGM_STATE_DIR", raising=False)
    monkeypatch.delenv("DGM_BOOTSTRAP", raising=False)


def rule_text(
    name: str = "dups", metric: str = "duplicate_rate", scope: str = "*", threshold: str = "0.01"
) -> str:
    return RULE.format(name=name, metric=metric, scope=scope, threshold=threshold)


def error_for(tmp_path: Path, text: str) -> str:
    (tmp_path / "dgm.toml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config("dgm.toml", cwd=tmp_path)
    return str(caught.value)


def test_rules_load_with_defaults(tmp_path: Path) -> None:
    text = rule_text() + "for_s = 60\nseverity = 'critical'\n[alerts_webhook]\nurl = 'http://x/h'\n"
    (tmp_path / "dgm.toml").write_text(text, encoding="utf-8")
    config = load_config("dgm.toml", cwd=tmp_path)
    assert config.alerts == (
        AlertRule(
            name="dups", metric="duplicate_rate", threshold=0.01, for_s=60.0, severity="critical"
        ),
    )
    assert config.alerts[0].window == "cumulative" and config.alerts[0].renotify_s == 0
    assert config.alerts_webhook.url == "http://x/h"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            rule_text(metric="duplicate_rat"),
            "dgm.toml: alerts[0].metric: rule 'dups': unknown metric 'duplicate_rat' "
            "(did you mean 'duplicate_rate'?)",
        ),
        (
            rule_text(metric="lso_lag", scope="group:app-*"),
            "dgm.toml: alerts[0].scope: rule 'dups': metric 'lso_lag' is measured per topic, "
            "not per group",
        ),
        (
            rule_text(scope="orders-[0-9"),
            "dgm.toml: alerts[0].scope: rule 'dups': expected balanced [...] in the pattern, "
            "got 'orders-[0-9'",
        ),
        (
            rule_text(scope="stream:x"),
            "dgm.toml: alerts[0].scope: rule 'dups': unknown scope kind 'stream' "
            "(expected pipeline, topic, group, run)",
        ),
        (
            rule_text(threshold="nan"),
            "dgm.toml: alerts[0].threshold: rule 'dups': expected a finite number, got nan",
        ),
        # A type the loader checks before the rule exists: the key path names the rule.
        (rule_text(threshold="'high'"), "dgm.toml: alerts[0].threshold: expected a number"),
        (
            rule_text() + "for_s = -1\n",
            "dgm.toml: alerts[0].for_s: rule 'dups': expected a number of seconds >= 0, got -1.0",
        ),
        (
            rule_text() + "severity = 'page'\n",
            "dgm.toml: alerts[0].severity: rule 'dups': expected one of 'info', 'warning', "
            "'critical', got 'page'",
        ),
        (
            rule_text() + rule_text(metric="lost"),
            "dgm.toml: alerts[1].name: expected a unique rule name, got 'dups' again "
            "(first at alerts[0])",
        ),
        ("[alerts_webhook]\nurl = 'ftp://x'\n", "dgm.toml: alerts_webhook.url: expected an http"),
    ],
)
def test_invalid_rules_name_rule_and_field(tmp_path: Path, text: str, expected: str) -> None:
    assert error_for(tmp_path, text).startswith(expected)


def test_validate_rule_returns_the_rule() -> None:
    rule = validate_rule(
        {"name": "lag", "metric": "consumer_lag_from_lso", "threshold": "1000", "for_s": 30}
    )
    assert rule == AlertRule(name="lag", metric="consumer_lag_from_lso", threshold=1000, for_s=30)
    assert isinstance(rule, AlertRule) and validate_rule(rule_to_dict(rule)) == rule


def test_validate_rule_lists_every_problem() -> None:
    problems = validate_rule({"name": "x", "metric": "lost", "threshold": "lots", "colour": 1})
    assert isinstance(problems, list)
    assert problems == [
        ("colour", problems[0][1]),
        ("threshold", "rule 'x': expected a number, got 'lots'"),
    ]
    assert problems[0][1].startswith("rule 'x': unknown key")
    hanging = {"name": "x", "metric": "hanging_transactions", "scope": "pipeline:*"}
    problems = validate_rule({**hanging, "threshold": 0, "comparison": "=>"})
    assert problems == [
        (
            "scope",
            "rule 'x': metric 'hanging_transactions' is measured per topic, not per pipeline",
        ),
        ("comparison", "rule 'x': expected one of '>', '>=', '<', '<=', '==', got '=>'"),
    ]
    assert validate_rule({"metric": "lost"}) == [
        ("name", "missing required key"),
        ("threshold", "missing required key"),
    ]


def test_scope_matching_and_comparison() -> None:
    rule = AlertRule(name="r", metric="lso_lag", scope="topic:orders-*", threshold=10)
    assert matches(rule, "orders-eu") and not matches(rule, "payments")
    assert holds(rule, 11) and not holds(rule, 10) and not holds(rule, None)
    group_rule = AlertRule(name="g", metric="consumer_lag_from_lso", scope="a:b", threshold=0)
    assert isinstance(validate_rule(rule_to_dict(group_rule)), list)  # 'a' is no scope kind


def test_name_clash_between_file_and_page_names_both() -> None:
    file_rule = AlertRule(name="dups", metric="duplicate_rate", threshold=0.01)
    page_rules = [
        AlertRule(name="dups", metric="lost", threshold=0),
        AlertRule(name="lag", metric="lso_lag", threshold=5),
    ]
    rules, errors = merge_rules([file_rule], page_rules, "dgm.toml")
    assert rules == (file_rule, page_rules[1])
    assert errors == [
        "alert rule name 'dups' is used twice: by dgm.toml alerts[0] and by a rule added on "
        "the dashboard's Alerts page (rename or delete one of them)"
    ]
