"""What one scrape shows: every family's series, read from one read-only connection.

`read_snapshot` opens the published DuckDB file once per scrape
(dgm.contracts.published.open_read_only) and closes it before returning, so a scrape shows one
whole run and nothing older than the newest publication. Per-pipeline totals come from
`dgm.contracts.published.read_verdicts`, the function `dgm verdicts --json` prints, so both
give the same numbers; the last closed window's counts and the newest samples from the views of
dgm.contracts.published_views. A null value leaves its series out (as alerts.metrics leaves out
a null subject).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from dgm import __version__
from dgm.config.services import Granularity
from dgm.contracts.clusters import DEFAULT_CLUSTER
from dgm.contracts.published import (
    open_read_only,
    published_path,
    read_verdicts,
    run_duration_s,
    stale_after_s,
)
from dgm.contracts.samples import SampleStore
from exporter import families as f

log = logging.getLogger(__name__)

Labels = tuple[str, ...]
Connection = duckdb.DuckDBPyConnection

# The newest run: its end and how long it took, in seconds.
RUN_SQL = """
SELECT epoch_ms(finished_at) / 1000.0, (epoch_ms(finished_at) - epoch_ms(started_at)) / 1000.0
FROM runs ORDER BY finished_at DESC LIMIT 1
"""
LAST_WINDOW_SQL = "SELECT epoch_ms(window_start) / 1000.0 FROM last_closed_window"
# Per pipeline and per topic in the last closed window; per topic over the retention.
LAST_WINDOW_PIPELINES_SQL = "SELECT * FROM last_window_pipelines ORDER BY pipeline"
TOPICS_SQL = "SELECT * FROM cumulative_topics ORDER BY topic"
LAST_WINDOW_TOPICS_SQL = "SELECT * FROM last_window_topics ORDER BY topic"
# Every partition at its topic's newest sample (a view of dgm.contracts.published_views).
OFFSETS_SQL = """
SELECT topic, "partition", lso_lag, lso_stuck_ms / 1000.0, cluster FROM latest_partition_offsets
"""
# Each group's own row of group_status: the worst partition's status.
GROUP_STATUS_SQL = (
    "SELECT group_id, status, severity, cluster, catch_up_s, catching_up "
    "FROM group_status_by_group ORDER BY group_id"
)
# Every partition of a group at the group's newest sample.
GROUP_LAG_SQL = """
SELECT group_id, topic, "partition", lag_from_hw, lag_from_lso, cluster, lag_s, share_lag
FROM latest_group_lag
"""
# Each group's type and state at its newest sample.
GROUP_INFO_SQL = """
SELECT DISTINCT group_id, coalesce(group_type, ''), coalesce(group_state, ''), cluster
FROM latest_group_lag ORDER BY group_id
"""
# The transactions table holds the last sample only.
TRANSACTIONS_SQL = """
SELECT topic, count(*), count(*) FILTER (WHERE hanging), any_value(cluster) FROM transactions
GROUP BY topic
"""


@dataclass(frozen=True)
class ScrapeSettings:
    """What a scrape needs from dgm.toml."""

    # analysis.interval_s: with the published run's duration, when the publication is stale.
    interval_s: float = 10.0
    # exporter.granularity: "topic" leaves the per-partition families out.
    granularity: Granularity = "partition"


DEFAULT_SETTINGS = ScrapeSettings()


@dataclass
class Snapshot:
    """Per family name, its series: label values (in the family's label order) -> value."""

    series: dict[str, dict[Labels, float]] = field(default_factory=lambda: defaultdict(dict))

    def set(self, family: f.Family, labels: Iterable[Any], value: Any) -> None:
        if value is not None:
            self.series[family.name][tuple(str(v) for v in labels)] = float(value)

    def largest(self, family: f.Family, labels: Iterable[Any], value: Any) -> None:
        """Keep the largest `value` of the series (SQL's max(): nulls skipped)."""
        if value is not None:
            key = tuple(str(v) for v in labels)
            series = self.series[family.name]
            series[key] = max(series.get(key, float(value)), float(value))

    def add(self, family: f.Family, labels: Iterable[Any], value: Any) -> None:
        """Sum `value` into the series (SQL's sum(): a null is skipped, and a series of only
        nulls is left out)."""
        if value is not None:
            key = tuple(str(v) for v in labels)
            series = self.series[family.name]
            series[key] = series.get(key, 0.0) + float(value)


def read_snapshot(
    state_dir: Path, now: datetime, settings: ScrapeSettings = DEFAULT_SETTINGS
) -> Snapshot:
    """The health series always; the published ones when a publication can be read."""
    snapshot = Snapshot()
    snapshot.set(f.BUILD_INFO, [__version__], 1)
    snapshot.set(f.STALE_AFTER, [], stale_after_s(settings.interval_s))
    sampled = SampleStore(state_dir).newest_time("offsets")
    if sampled is not None:
        snapshot.set(f.LAST_SAMPLE_TIMESTAMP, [], sampled.timestamp())
        snapshot.set(f.LAST_SAMPLE_AGE, [], (now - sampled).total_seconds())
    published = Snapshot()
    try:
        with open_read_only(published_path(state_dir)) as db:
            read_published(db, published, now, settings)
    except FileNotFoundError:
        snapshot.set(f.PUBLICATION_UP, [], 0)
        return snapshot
    except (duckdb.Error, OSError) as error:
        log.warning("cannot read %s: %s", published_path(state_dir), error)
        snapshot.set(f.PUBLICATION_UP, [], 0)
        return snapshot
    snapshot.set(f.PUBLICATION_UP, [], 1)
    snapshot.series.update(published.series)
    return snapshot


def read_published(
    db: Connection, snapshot: Snapshot, now: datetime, settings: ScrapeSettings
) -> None:
    run = db.execute(RUN_SQL).fetchone()
    if run is not None and run[0] is not None:
        snapshot.set(f.LAST_ANALYSIS_TIMESTAMP, [], run[0])
        snapshot.set(f.LAST_ANALYSIS_AGE, [], now.timestamp() - float(run[0]))
        snapshot.set(f.LAST_ANALYSIS_DURATION, [], run[1])
    snapshot.set(f.STALE_AFTER, [], stale_after_s(settings.interval_s, run_duration_s(db)))
    add_verdicts(db, snapshot)
    add_last_window(db, snapshot)
    add_topics(db, snapshot)
    add_offsets(db, snapshot, settings.granularity)
    add_group_lag(db, snapshot, settings.granularity)
    add_group_status(db, snapshot)
    add_group_info(db, snapshot)
    add_transactions(db, snapshot)


def _records(db: Connection, sql: str) -> list[dict[str, Any]]:
    cursor = db.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def on_cluster(name: str, cluster: str | None) -> tuple[str, str]:
    """(the name as its cluster knows it, the cluster): a published name is qualified off the
    default cluster ('<cluster>/<name>', dgm.contracts.clusters)."""
    cluster = cluster or DEFAULT_CLUSTER
    return name if cluster == DEFAULT_CLUSTER else name.removeprefix(f"{cluster}/"), cluster


def add_verdicts(db: Connection, snapshot: Snapshot) -> None:
    rows, _ = read_verdicts(db)
    for row in rows:
        name = row["pipeline"]
        info = [name, row["declared"], row["achieved"], row["evidence"] or ""]
        group, _ = on_cluster(row["consumer_group"] or "", row["source_cluster"])
        clusters = [
            row["source_cluster"] or DEFAULT_CLUSTER,
            row["sink_cluster"] or DEFAULT_CLUSTER,
        ]
        snapshot.set(f.VERDICT_INFO, [*info, group, *clusters], 1)
        meets = row["meets_declared"]
        snapshot.set(f.MEETS_DECLARED, [name], None if meets is None else int(meets))
        for family, column in f.PIPELINE_VALUES:
            snapshot.set(family, [name], row[column])
        for quantile, column in f.LATENCY_QUANTILES:
            snapshot.set(f.DELIVERY_LATENCY, [name, quantile], row[column])
        for cause, copies in sorted(row["duplicate_causes"].items()):
            snapshot.set(f.DUPLICATES_BY_CAUSE, [name, cause], copies)


def add_last_window(db: Connection, snapshot: Snapshot) -> None:
    window = db.execute(LAST_WINDOW_SQL).fetchone()
    if window is not None:
        snapshot.set(f.LAST_WINDOW_START, [], window[0])
    for row in _records(db, LAST_WINDOW_PIPELINES_SQL):
        for family, column in f.PIPELINE_LAST_WINDOW_VALUES:
            snapshot.set(family, [row["pipeline"]], row[column])
        for quantile, column in f.LATENCY_QUANTILES:
            snapshot.set(f.LAST_WINDOW_DELIVERY_LATENCY, [row["pipeline"], quantile], row[column])


def add_topics(db: Connection, snapshot: Snapshot) -> None:
    for sql, values in (
        (TOPICS_SQL, f.TOPIC_VALUES),
        (LAST_WINDOW_TOPICS_SQL, f.TOPIC_LAST_WINDOW_VALUES),
    ):
        for row in _records(db, sql):
            labels = on_cluster(row["topic"], row["cluster"])
            for family, column in values:
                snapshot.set(family, labels, row[column])


def add_offsets(db: Connection, snapshot: Snapshot, granularity: Granularity) -> None:
    worst: dict[tuple[str, str], tuple[float | None, float | None]] = {}
    for topic, partition, lag, stuck_s, cluster in db.execute(OFFSETS_SQL).fetchall():
        plain, cluster = on_cluster(topic, cluster)
        if granularity == "partition":
            snapshot.set(f.LSO_LAG, [plain, partition, cluster], lag)
            snapshot.set(f.LSO_STUCK, [plain, partition, cluster], stuck_s)
        lag_max, stuck_max = worst.get((plain, cluster), (None, None))
        worst[(plain, cluster)] = (_max(lag_max, lag), _max(stuck_max, stuck_s))
    for labels, (lag_max, stuck_max) in worst.items():
        snapshot.set(f.TOPIC_LSO_LAG, labels, lag_max)
        snapshot.set(f.TOPIC_LSO_STUCK, labels, stuck_max)


def _max(a: float | None, b: float | None) -> float | None:
    """SQL's max(): nulls skipped."""
    return b if a is None else a if b is None else max(a, b)


def add_group_lag(db: Connection, snapshot: Snapshot, granularity: Granularity) -> None:
    for group_id, topic, partition, lag_hw, lag_lso, cluster, lag_s, share_lag in db.execute(
        GROUP_LAG_SQL
    ).fetchall():
        group, cluster = on_cluster(group_id, cluster)
        plain = on_cluster(topic, cluster)[0]
        if granularity == "partition":
            at = [group, plain, partition, cluster]
            snapshot.set(f.PARTITION_LAG_FROM_HW, at, lag_hw)
            snapshot.set(f.PARTITION_LAG_FROM_LSO, at, lag_lso)
            snapshot.set(f.PARTITION_LAG_SECONDS, at, lag_s)
        snapshot.largest(f.TOPIC_MAX_LAG_SECONDS, [group, plain, cluster], lag_s)
        snapshot.largest(f.GROUP_MAX_LAG_SECONDS, [group, cluster], lag_s)
        snapshot.add(f.TOPIC_LAG_FROM_HW, [group, plain, cluster], lag_hw)
        snapshot.add(f.TOPIC_LAG_FROM_LSO, [group, plain, cluster], lag_lso)
        snapshot.add(f.GROUP_LAG_FROM_HW, [group, cluster], lag_hw)
        snapshot.add(f.GROUP_LAG_FROM_LSO, [group, cluster], lag_lso)
        snapshot.add(f.SHARE_GROUP_LAG, [group, cluster], share_lag)


def add_group_status(db: Connection, snapshot: Snapshot) -> None:
    rows = db.execute(GROUP_STATUS_SQL).fetchall()
    for group_id, status, severity, cluster, catch_up_s, catching_up in rows:
        group, cluster = on_cluster(group_id, cluster)
        snapshot.set(f.GROUP_STATUS, [group, cluster], severity)
        snapshot.set(f.GROUP_STATUS_INFO, [group, status, cluster], 1)
        snapshot.set(f.GROUP_CATCH_UP_SECONDS, [group, cluster], catch_up_s)
        if catching_up is not None:
            snapshot.set(f.GROUP_CATCHING_UP, [group, cluster], int(catching_up))


def add_group_info(db: Connection, snapshot: Snapshot) -> None:
    for group_id, kind, state, cluster in db.execute(GROUP_INFO_SQL).fetchall():
        group, cluster = on_cluster(group_id, cluster)
        snapshot.set(f.GROUP_INFO, [group, kind, state, cluster], 1)


def add_transactions(db: Connection, snapshot: Snapshot) -> None:
    for topic, open_count, hanging, cluster in db.execute(TRANSACTIONS_SQL).fetchall():
        labels = on_cluster(topic, cluster)
        snapshot.set(f.OPEN_TRANSACTIONS, labels, open_count)
        snapshot.set(f.HANGING_TRANSACTIONS, labels, hanging)
