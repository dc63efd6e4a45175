"""A rule's current value per subject, read from the published DuckDB file
(dgm/contracts/published.py).

One short-lived read-only connection per evaluation; the analysis renames a new file over the
published one, so an open connection keeps reading the run it opened. Each metric is one SQL
string and one function; a subject whose value is null (no ids, nothing checked) is left out,
and a left-out subject never satisfies a rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

import duckdb

from dgm.alerting.rules import matches, scope_kind
from dgm.config.alerts import AlertRule
from dgm.contracts.published import PUBLISHED_FILE, open_read_only
from dgm.util.errors import UserFacingError

# subject (pipeline, topic or group name; RUN_SUBJECT for run-wide metrics) -> value
Values = dict[str, float]
Connection = duckdb.DuckDBPyConnection
RUN_SUBJECT = "analysis"


class MetricsUnavailable(UserFacingError):
    """No published analysis to read (yet), or it cannot be read."""


# Per pipeline, cumulative over the retention: {column} is a verdicts column or expression.
VERDICTS_SQL = "SELECT pipeline, {column} FROM verdicts"
# Per pipeline, the newest window only.
LATEST_PIPELINE_WINDOW_SQL = """
SELECT pipeline, {column} FROM pipeline_windows
QUALIFY row_number() OVER (PARTITION BY pipeline ORDER BY window_start DESC) = 1
"""
# Per pipeline, its delivery latency's 99th percentile: over the retention, or of the newest
# window whose records have a measured latency (newer windows hold records not delivered or
# not yet checked, which have none).
LATENCY_SQL = "SELECT pipeline, latency_p99_s FROM verdicts"
LATEST_LATENCY_SQL = """
SELECT pipeline, latency_p99_s FROM pipeline_windows WHERE latency_p99_s IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY pipeline ORDER BY window_start DESC) = 1
"""
# Per topic (the views of dgm.contracts.published_views: one level of detail each, newest samples).
TOPIC_CUMULATIVE_SQL = "SELECT topic, {column} FROM cumulative_topics"
LATEST_TOPIC_WINDOW_SQL = """
SELECT topic, {column} FROM topic_window_series
QUALIFY row_number() OVER (PARTITION BY topic ORDER BY window_start DESC) = 1
"""
# Per topic, over its partitions at the topic's latest sample; {aggregate} of partition rows.
LATEST_OFFSETS_SQL = "SELECT topic, {aggregate} FROM latest_partition_offsets GROUP BY topic"
# The transactions table holds the last sample only.
HANGING_SQL = "SELECT topic, count(*) FILTER (WHERE hanging) FROM transactions GROUP BY topic"
# Per group, summed over its partitions at the group's latest sample.
GROUP_LAG_SQL = "SELECT group_id, sum(lag_from_lso) FROM latest_group_lag GROUP BY group_id"
# Per group, its oldest uncommitted record's age: the largest lag in seconds of its partitions.
GROUP_LAG_SECONDS_SQL = "SELECT group_id, max(lag_s) FROM latest_group_lag GROUP BY group_id"
# Per group, the severity of its worst partition (the group's own row of group_status).
GROUP_STATUS_SQL = "SELECT group_id, severity FROM group_status_by_group"
# Seconds since the epoch of the newest sample the run read, or of the run's end without one.
FRESHNESS_SQL = """
SELECT epoch_ms(coalesce(last_sample_at, finished_at)) / 1000.0 FROM runs
ORDER BY finished_at DESC LIMIT 1
"""

# verdicts / pipeline_windows column (or expression) per pipeline metric.
_PIPELINE_COLUMNS = {
    "duplicate_rate": "duplicate_rate",
    "loss_rate": "loss_rate",
    "lost": "lost",
    "aborted_reads": "aborted_reads",
    "verdict_violates": "(meets_declared IS FALSE)::INTEGER",
    "torn_commits": "torn_commits",
    "producer_out_of_order": "producer_out_of_order",
    "sink_out_of_order": "sink_out_of_order",
    "late_records": "late_records",
    "truncated_records": "truncated_records",
    "inconsistent_offsets": "inconsistent_offsets",
}
# The pipeline metrics also measured per topic: topic_windows column per metric.
_TOPIC_COLUMNS = {
    "duplicate_rate": "duplicate_rate",
    "truncated_records": "truncated_records",
    "inconsistent_offsets": "inconsistent_offsets",
}


def _rows(db: Connection, sql: str) -> Values:
    return {
        str(s): float(v) for s, v in db.execute(sql).fetchall() if s is not None and v is not None
    }


def pipeline_metric(db: Connection, metric: str, window: str) -> Values:
    """A metric of _PIPELINE_COLUMNS (duplicate_rate, lost, torn_commits, truncated_records,
    …) per pipeline."""
    sql = VERDICTS_SQL if window == "cumulative" else LATEST_PIPELINE_WINDOW_SQL
    return _rows(db, sql.format(column=_PIPELINE_COLUMNS[metric]))


def topic_metric(db: Connection, metric: str, window: str) -> Values:
    """duplicate_rate, truncated_records or inconsistent_offsets per topic: the cumulative
    row, or the topic's newest window."""
    sql = TOPIC_CUMULATIVE_SQL if window == "cumulative" else LATEST_TOPIC_WINDOW_SQL
    return _rows(db, sql.format(column=_TOPIC_COLUMNS[metric]))


def latency_p99(db: Connection, window: str) -> Values:
    """The delivery latency's 99th percentile per pipeline (docs/design.md, "Delivery
    latency"), seconds."""
    return _rows(db, LATENCY_SQL if window == "cumulative" else LATEST_LATENCY_SQL)


def lso_lag(db: Connection) -> Values:
    """High watermark - LSO, the largest over the topic's partitions at its latest sample."""
    return _rows(db, LATEST_OFFSETS_SQL.format(aggregate="max(lso_lag)"))


def lso_stuck_s(db: Connection) -> Values:
    """Seconds the LSO has not moved with records above it, the longest over the partitions."""
    return _rows(db, LATEST_OFFSETS_SQL.format(aggregate="max(lso_stuck_ms) / 1000.0"))


def hanging_transactions(db: Connection) -> Values:
    """Hanging transactions per topic with open transactions at the last sample."""
    return _rows(db, HANGING_SQL)


def consumer_lag_from_lso(db: Connection) -> Values:
    """LSO - committed offset (transaction-correct lag), summed over the group's partitions."""
    return _rows(db, GROUP_LAG_SQL)


def lag_seconds(db: Connection) -> Values:
    """The age of the oldest record the group has not committed, in seconds (docs/design.md,
    "Lag in seconds"); a group whose lag in seconds is unknown has no value."""
    return _rows(db, GROUP_LAG_SECONDS_SQL)


def group_status(db: Connection) -> Values:
    """The group's status as a number: its severity (dgm.contracts.vocabulary.GroupStatus)."""
    return _rows(db, GROUP_STATUS_SQL)


def staleness_s(db: Connection, now: datetime) -> Values:
    """Seconds from the newest sample the published run read (or its end) to `now`."""
    row = db.execute(FRESHNESS_SQL).fetchone()
    if row is None or row[0] is None:
        return {}
    return {RUN_SUBJECT: now.timestamp() - float(row[0])}


def _windowed(db: Connection, rule: AlertRule, now: datetime) -> Values:
    """A pipeline metric (or one measured per topic too), cumulative or of the newest window."""
    if rule.metric in _TOPIC_COLUMNS and scope_kind(rule) == "topic":
        return topic_metric(db, rule.metric, rule.window)
    return pipeline_metric(db, rule.metric, rule.window)


# A rule's values for every subject, read from the publication.
Reader = Callable[[Connection, AlertRule, datetime], Values]
# One reader per metric of dgm.alerting.metrics (tests/alerts/test_metrics.py holds them equal).
READERS: dict[str, Reader] = {
    **{metric: _windowed for metric in _PIPELINE_COLUMNS},
    "latency_p99": lambda db, rule, _now: latency_p99(db, rule.window),
    "lso_lag": lambda db, _rule, _now: lso_lag(db),
    "lso_stuck_s": lambda db, _rule, _now: lso_stuck_s(db),
    "hanging_transactions": lambda db, _rule, _now: hanging_transactions(db),
    "consumer_lag_from_lso": lambda db, _rule, _now: consumer_lag_from_lso(db),
    "lag_seconds": lambda db, _rule, _now: lag_seconds(db),
    "group_status": lambda db, _rule, _now: group_status(db),
    "staleness_s": lambda db, _rule, now: staleness_s(db, now),
}


def rule_values(db: Connection, rule: AlertRule, now: datetime) -> Values:
    """The rule's metric for every subject within its scope."""
    values = READERS[rule.metric](db, rule, now)
    return {subject: value for subject, value in values.items() if matches(rule, subject)}


def read_values(
    state_dir: Path, rules: Iterable[AlertRule], now: datetime
) -> dict[str, Values | str]:
    """Per rule name: its values, or why they could not be read (a query error).

    MetricsUnavailable when nothing is published yet or the file cannot be opened: then no
    rule can be judged, and none should change state.
    """
    path = state_dir / PUBLISHED_FILE
    if not path.exists():
        raise MetricsUnavailable(f"no analysis published yet ({path} does not exist)")
    try:
        db = open_read_only(path)
    except (duckdb.Error, OSError) as error:
        raise MetricsUnavailable(f"cannot read {path}: {error}") from None
    results: dict[str, Values | str] = {}
    with db:
        for rule in rules:
            try:
                results[rule.name] = rule_values(db, rule, now)
            except duckdb.Error as error:
                results[rule.name] = f"cannot compute {rule.metric} from {path}: {error}"
    return results
