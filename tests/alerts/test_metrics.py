"""Metric values per subject, read from a published DuckDB file built from the contract's DDL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from alerts.metrics import READERS, RUN_SUBJECT, MetricsUnavailable, read_values
from dgm.alerting.metrics import ALERT_METRICS, METRICS
from dgm.config.alerts import AlertRule
from tests.support.published_rows import at, publish, verdict


def offsets(t: float, topic: str, partition: int, lso_lag: int, stuck_ms: int) -> dict[str, Any]:
    return {"sampled_at": at(t), "topic": topic, "partition": partition, "lso_lag": lso_lag,
            "lso_stuck_ms": stuck_ms}  # fmt: skip


def group_lag(t: float, group: str, partition: int, lag: int | None) -> dict[str, Any]:
    return {"sampled_at": at(t), "group_id": group, "topic": "orders", "partition": partition,
            "lag_from_lso": lag}  # fmt: skip


ROWS: dict[str, list[dict[str, Any]]] = {
    "runs": [
        {"run_id": "r1", "started_at": at(0), "finished_at": at(100), "last_sample_at": at(90)}
    ],
    "verdicts": [
        verdict(
            "orders",
            duplicate_rate=0.05,
            lost=3,
            loss_rate=0.003,
            aborted_reads=2,
            torn_commits=1,
            producer_out_of_order=7,
            sink_out_of_order=4,
        )
        | {"truncated_records": 4, "inconsistent_offsets": 1},
        verdict("payments", meets_declared=False, achieved="at-least-once"),
        verdict("fresh", meets_declared=None, duplicate_rate=None, achieved="insufficient"),
    ],
    "pipeline_windows": [
        {"pipeline": "orders", "window_start": at(0), "duplicate_rate": 0.2, "lost": 3},
        {
            "pipeline": "orders",
            "window_start": at(60),
            "duplicate_rate": 0.01,
            "lost": 0,
            "sink_out_of_order": 2,
        },
        {"pipeline": "payments", "window_start": at(0), "meets_declared": False},
    ],
    "topic_windows": [
        {"topic": "orders-out", "window_start": None, "duplicate_rate": 0.04}
        | {"truncated_records": 4, "inconsistent_offsets": 1},
        {"topic": "orders-out", "window_start": at(0), "duplicate_rate": 0.3}
        | {"truncated_records": 4, "inconsistent_offsets": 1},
        {"topic": "orders-out", "window_start": at(60), "duplicate_rate": 0.02}
        | {"truncated_records": 0, "inconsistent_offsets": 0},
    ],
    "partition_offsets": [
        # An old sample with a bigger lag must not count: only the latest sample per topic.
        offsets(10, "orders", 0, lso_lag=999, stuck_ms=99000),
        offsets(80, "orders", 0, lso_lag=7, stuck_ms=1500),
        offsets(80, "orders", 1, lso_lag=12, stuck_ms=30000),
        offsets(70, "payments", 0, lso_lag=0, stuck_ms=0),
    ],
    "group_lag": [
        group_lag(10, "app", 0, 500),
        group_lag(80, "app", 0, 4),
        group_lag(80, "app", 1, 6),
        group_lag(80, "idle", 0, None),  # no committed offset: no lag to sum
    ],
    "group_status": [
        # The group row (topic null) carries the group's worst severity; partition rows do not
        # count on their own.
        {"group_id": "app", "topic": None, "partition": None, "status": "STALL", "severity": 2},
        {"group_id": "app", "topic": "orders", "partition": 0, "status": "STALL", "severity": 2},
        {"group_id": "app", "topic": "orders", "partition": 1, "status": "OK", "severity": 0},
        {"group_id": "idle", "topic": None, "partition": None, "status": "OK", "severity": 0},
        {"group_id": "gone", "topic": None, "partition": None, "status": "REWIND", "severity": 5},
    ],
    "transactions": [
        {"sampled_at": at(80), "topic": "orders", "partition": 0, "hanging": True},
        {"sampled_at": at(80), "topic": "orders", "partition": 1, "hanging": True},
        {"sampled_at": at(80), "topic": "payments", "partition": 0, "hanging": False},
    ],
}


def values_of(tmp_path: Path, metric: str, scope: str = "*", window: str = "cumulative") -> object:
    rule = AlertRule(name="r", metric=metric, scope=scope, threshold=0, window=window)
    return read_values(tmp_path, [rule], now=at(150))["r"]


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    publish(tmp_path, ROWS)
    return tmp_path


@pytest.mark.parametrize(
    ("metric", "scope", "window", "expected"),
    [
        ("duplicate_rate", "*", "cumulative", {"orders": 0.05, "payments": 0.0}),
        ("duplicate_rate", "ord*", "latest", {"orders": 0.01}),
        ("duplicate_rate", "topic:*", "cumulative", {"orders-out": 0.04}),
        ("duplicate_rate", "topic:*", "latest", {"orders-out": 0.02}),
        ("lost", "*", "cumulative", {"orders": 3, "payments": 0, "fresh": 0}),
        ("lost", "*", "latest", {"orders": 0}),
        ("loss_rate", "*", "cumulative", {"orders": 0.003}),
        ("truncated_records", "orders", "cumulative", {"orders": 4}),
        ("truncated_records", "topic:*", "cumulative", {"orders-out": 4}),
        ("truncated_records", "topic:*", "latest", {"orders-out": 0}),
        ("inconsistent_offsets", "topic:orders-*", "cumulative", {"orders-out": 1}),
        ("aborted_reads", "orders", "cumulative", {"orders": 2}),
        ("verdict_violates", "*", "cumulative", {"orders": 0, "payments": 1, "fresh": 0}),
        ("verdict_violates", "*", "latest", {"orders": 0, "payments": 1}),
        ("lso_lag", "*", "cumulative", {"orders": 12, "payments": 0}),
        ("lso_stuck_s", "orders", "cumulative", {"orders": 30.0}),
        ("hanging_transactions", "*", "cumulative", {"orders": 2, "payments": 0}),
        ("consumer_lag_from_lso", "*", "cumulative", {"app": 10}),
        ("group_status", "*", "cumulative", {"app": 2, "idle": 0, "gone": 5}),
        ("group_status", "group:a*", "cumulative", {"app": 2}),
        ("staleness_s", "*", "cumulative", {RUN_SUBJECT: 60.0}),
        ("torn_commits", "orders", "cumulative", {"orders": 1}),
        ("producer_out_of_order", "orders", "cumulative", {"orders": 7}),
        ("sink_out_of_order", "*", "cumulative", {"orders": 4}),  # null: left out
        ("sink_out_of_order", "orders", "latest", {"orders": 2}),
    ],
)
def test_metric_values(
    state_dir: Path, metric: str, scope: str, window: str, expected: dict[str, float]
) -> None:
    assert values_of(state_dir, metric, scope, window) == pytest.approx(expected)


def test_staleness_falls_back_to_finished_at(tmp_path: Path) -> None:
    publish(tmp_path, {"runs": [{"run_id": "r", "finished_at": at(100), "last_sample_at": None}]})
    assert values_of(tmp_path, "staleness_s") == pytest.approx({RUN_SUBJECT: 50.0})


def test_nothing_published_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(MetricsUnavailable, match="no analysis published yet"):
        values_of(tmp_path, "lost")


def test_a_broken_table_fails_its_rule_only(state_dir: Path) -> None:
    import duckdb

    with duckdb.connect(str(state_dir / "dgm.duckdb")) as db:
        db.execute("DROP TABLE group_lag")
    rules = [
        AlertRule(name="lag", metric="consumer_lag_from_lso", threshold=0),
        AlertRule(name="lost", metric="lost", threshold=0),
    ]
    values = read_values(state_dir, rules, now=at(150))
    assert isinstance(values["lag"], str) and "group_lag" in values["lag"]
    assert values["lost"] == {"orders": 3, "payments": 0, "fresh": 0}


def test_every_declared_metric_has_a_reader_and_every_reader_a_declaration() -> None:
    assert set(READERS) == set(ALERT_METRICS)
    # The dashboard's help texts and `dgm alerts list`'s windows come from the same list.
    assert [metric.name for metric in METRICS] == list(ALERT_METRICS)
