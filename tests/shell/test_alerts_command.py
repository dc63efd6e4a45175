"""`dgm alerts list` and `dgm alerts test RULE`, through their argparse registration."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from alerts.run import evaluate_after_analysis
from dgm.alerting.store import AlertStore
from dgm.config.loader import load_config
from dgm.util.errors import UserFacingError
from shell.alerts_command import register
from tests.support.published_rows import at, publish, verdict

CONFIG = """
state_dir = "state"

[[alerts]]
name = "dups"
metric = "duplicate_rate"
threshold = 0.01
severity = "critical"
"""


@pytest.fixture(autouse=True)
def _no_env_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DGM_STATE_DIR", raising=False)
    monkeypatch.delenv("DGM_BOOTSTRAP", raising=False)


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "dgm.toml"
    path.write_text(CONFIG, encoding="utf-8")
    state_dir = tmp_path / "state"
    publish(state_dir, {"verdicts": [verdict("orders", duplicate_rate=0.05), verdict("other")]})
    AlertStore(state_dir).add_rule({"name": "stuck", "metric": "lso_stuck_s", "threshold": 60})
    return path


def dgm(config_path: Path, *argv: str) -> int:
    parser = argparse.ArgumentParser(prog="dgm")
    parser.add_argument("--config")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["--config", str(config_path), *argv])
    result: int = args.handler(args)
    return result


def test_list_shows_rules_and_their_state(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert dgm(config_path, "alerts", "list") == 0
    assert capsys.readouterr().out.splitlines() == [
        "dups [critical, dgm.toml]: duplicate_rate > 0.01 (cumulative), scope *",
        "  ok",
        "stuck [warning, page]: lso_stuck_s > 60, scope *",
        "  ok",
    ]
    evaluate_after_analysis(load_config(config_path), now=at(100))
    dgm(config_path, "alerts", "list")
    assert capsys.readouterr().out.splitlines()[1] == (
        "  firing: orders = 0.05 since 2026-01-01 00:01:40+00:00"
    )


def test_test_prints_values_and_changes_nothing(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = AlertStore(config_path.parent / "state")
    assert dgm(config_path, "alerts", "test", "dups") == 0
    assert capsys.readouterr().out.splitlines() == [
        "dups: duplicate_rate > 0.01 (cumulative), pipeline scope *",
        "  orders = 0.05: holds; ok -> firing; would notify: firing",
        "  other = 0: does not hold; ok -> ok; would not notify",
    ]
    assert store.states() == {} and store.history() == [] and store.deliveries() == []


def test_unknown_rule_and_clash_are_user_facing(config_path: Path) -> None:
    with pytest.raises(UserFacingError, match=r"no alert rule named 'dup' \(did you mean 'dups'"):
        dgm(config_path, "alerts", "test", "dup")
    store = AlertStore(config_path.parent / "state")
    store.add_rule({"name": "dups", "metric": "lost", "threshold": 0})
    with pytest.raises(UserFacingError, match="'dups' is used twice"):
        dgm(config_path, "alerts", "list")
