"""alerts.sqlite: page rules validated before insert, name clashes, WAL for a concurrent reader."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from dgm.alerting.store import AlertStore, rules_in_effect
from dgm.config.alerts import AlertRule
from dgm.config.document import DgmConfig

LAG = {"name": "lag", "metric": "consumer_lag_from_lso", "scope": "app-*", "threshold": 1000}


def test_page_rules_are_validated_before_insert(tmp_path: Path) -> None:
    store = AlertStore(tmp_path)
    assert store.add_rule({**LAG, "threshold": "many"}) == [
        ("threshold", "rule 'lag': expected a number, got 'many'")
    ]
    assert store.page_rules() == ([], [])
    rule = store.add_rule(LAG)
    assert rule == AlertRule(
        name="lag", metric="consumer_lag_from_lso", scope="app-*", threshold=1000
    )
    assert store.page_rules() == ([rule], [])
    assert store.add_rule({**LAG, "threshold": 5}) == [
        ("name", "rule 'lag': a page rule of this name exists")
    ]
    replaced = store.add_rule({**LAG, "threshold": 5}, replace=True)
    assert store.page_rules() == ([replaced], [])
    assert store.delete_rule("lag") and not store.delete_rule("lag")


def test_a_page_rule_cannot_take_a_file_rule_name(tmp_path: Path) -> None:
    file_rule = AlertRule(name="lag", metric="lso_lag", threshold=10)
    assert AlertStore(tmp_path).add_rule(LAG, file_rules=[file_rule]) == [
        ("name", "rule 'lag': dgm.toml already declares a rule of this name")
    ]


def test_rules_in_effect_report_a_clash_naming_both(tmp_path: Path) -> None:
    store = AlertStore(tmp_path)
    store.add_rule(LAG)
    store.add_rule({**LAG, "name": "lag-2"})
    # The file gains a rule of the same name after the page rule was added.
    file_rule = AlertRule(name="lag", metric="lso_lag", threshold=10)
    config = DgmConfig(source=tmp_path / "dgm.toml", state_dir=tmp_path, alerts=(file_rule,))
    rules, errors = rules_in_effect(config, store)
    assert [rule.name for rule in rules] == ["lag", "lag-2"] and rules[0] == file_rule
    assert errors == [
        f"alert rule name 'lag' is used twice: by {tmp_path / 'dgm.toml'} alerts[0] and by a "
        "rule added on the dashboard's Alerts page (rename or delete one of them)"
    ]


def test_a_reader_does_not_block_the_writer(tmp_path: Path) -> None:
    store = AlertStore(tmp_path, timeout_s=1)
    store.add_rule(LAG)
    with closing(sqlite3.connect(store.path)) as reader:
        assert reader.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM rules").fetchone() == (1,)
        store.add_rule({**LAG, "name": "lag-2"})  # would time out under a rollback journal
        assert reader.execute("SELECT count(*) FROM rules").fetchone() == (1,)  # its snapshot
        reader.execute("COMMIT")
    assert len(store.page_rules()[0]) == 2
