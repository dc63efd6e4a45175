"""What one scrape shows: every family's series, read from one read-only connection.

`read_snapshot` opens the published DuckDB file once per scrape (dgm.published.open_read_only)
and closes it before returning, so a scrape shows one whole run and nothing older than the
newest publication. Per-pipeline values come from `dgm.published.read_verdicts`, the function
`dgm verdicts --json` prints, so both give the same numbers. A null value leaves its series
out (as alerts.metrics leaves out a null subject).
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
from dgm.clusters import DEFAULT_CLUSTER
from dgm.published import open_read_only, published_path, read_verdicts
from dgm.samples import SampleStore
from exporter import families as f

log = logging.getLogger(__name__)

Labels = tuple[str, ...]
Connection = duckdb.DuckDBPyConnection

# The newest run: its end and how long it took, in seconds.
RUN_SQL = """
SELECT epoch_ms(finished_at) / 1000.0, (epoch_ms(finished_at) - epoch_ms(started_at)) / 1000.0
FROM runs ORDER BY finished_at DESC LIMIT 1
"""
# Every partition at its topic's newest sample (a view of dgm.published_views).
OFFSETS_SQL = """
SELECT topic, "partition", lso_lag, lso_stuck_ms / 1000.0, cluster FROM latest_partition_offsets
"""
# Each group's own row of group_status: the worst partition's status.
GROUP_STATUS_SQL = (
    "SELECT group_id, status, severity, cluster FROM group_status_by_group ORDER BY group_id"
)
# Every partition of a group at the group's newest sample.
GROUP_LAG_SQL = """
SELECT group_id, topic, "partition", lag_from_hw, lag_from_lso, cluster FROM latest_group_lag
"""
# The transactions table holds the last sample only.
TRANSACTIONS_SQL = """
SELECT topic, count(*), count(*) FILTER (WHERE hanging), any_value(cluster) FROM transactions
GROUP BY topic
"""


@dataclass
class Snapshot:
    """Per family name, its series: label values (in the family's label order) -> value."""

    series: dict[str, dict[Labels, float]] = field(default_factory=lambda: defaultdict(dict))

    def set(self, family: f.Family, labels: Iterable[Any], value: Any) -> None:
        if value is not None:
            self.series[family.name][tuple(str(v) for v in labels)] = float(value)


def read_snapshot(state_dir: Path, now: datetime) -> Snapshot:
    """The health series always; the published ones when a publication can be read."""
    snapshot = Snapshot()
    snapshot.set(f.BUILD_INFO, [__version__], 1)
    sampled = SampleStore(state_dir).newest_time("offsets")
    if sampled is not None:
        snapshot.set(f.LAST_SAMPLE_TIMESTAMP, [], sampled.timestamp())
        snapshot.set(f.LAST_SAMPLE_AGE, [], (now - sampled).total_seconds())
    published = Snapshot()
    try:
        with open_read_only(published_path(state_dir)) as db:
            read_published(db, published, now)
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


def read_published(db: Connection, snapshot: Snapshot, now: datetime) -> None:
    run = db.execute(RUN_SQL).fetchone()
    if run is not None and run[0] is not None:
        snapshot.set(f.LAST_ANALYSIS_TIMESTAMP, [], run[0])
        snapshot.set(f.LAST_ANALYSIS_AGE, [], now.timestamp() - float(run[0]))
        snapshot.set(f.LAST_ANALYSIS_DURATION, [], run[1])
    add_verdicts(db, snapshot)
    add_offsets(db, snapshot)
    add_group_lag(db, snapshot)
    add_group_status(db, snapshot)
    add_transactions(db, snapshot)


def on_cluster(name: str, cluster: str | None) -> tuple[str, str]:
    """(the name as its cluster knows it, the cluster): a published name is qualified off the
    default cluster ('<cluster>/<name>', dgm.clusters)."""
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


def add_offsets(db: Connection, snapshot: Snapshot) -> None:
    for topic, partition, lag, stuck_s, cluster in db.execute(OFFSETS_SQL).fetchall():
        plain, cluster = on_cluster(topic, cluster)
        snapshot.set(f.LSO_LAG, [plain, partition, cluster], lag)
        snapshot.set(f.LSO_STUCK, [plain, partition, cluster], stuck_s)


def add_group_lag(db: Connection, snapshot: Snapshot) -> None:
    from_hw: dict[tuple[str, str], float] = {}
    from_lso: dict[tuple[str, str], float] = {}
    for group_id, topic, partition, lag_hw, lag_lso, cluster in db.execute(
        GROUP_LAG_SQL
    ).fetchall():
        group = on_cluster(group_id, cluster)
        at = [group[0], on_cluster(topic, cluster)[0], partition, group[1]]
        snapshot.set(f.PARTITION_LAG_FROM_HW, at, lag_hw)
        snapshot.set(f.PARTITION_LAG_FROM_LSO, at, lag_lso)
        # SQL's sum(): nulls skipped, and a group with only nulls has no sum.
        if lag_hw is not None:
            from_hw[group] = from_hw.get(group, 0.0) + lag_hw
        if lag_lso is not None:
            from_lso[group] = from_lso.get(group, 0.0) + lag_lso
    for group, value in from_hw.items():
        snapshot.set(f.GROUP_LAG_FROM_HW, group, value)
    for group, value in from_lso.items():
        snapshot.set(f.GROUP_LAG_FROM_LSO, group, value)


def add_group_status(db: Connection, snapshot: Snapshot) -> None:
    for group_id, status, severity, cluster in db.execute(GROUP_STATUS_SQL).fetchall():
        group, cluster = on_cluster(group_id, cluster)
        snapshot.set(f.GROUP_STATUS, [group, status, cluster], severity)


def add_transactions(db: Connection, snapshot: Snapshot) -> None:
    for topic, open_count, hanging, cluster in db.execute(TRANSACTIONS_SQL).fetchall():
        labels = on_cluster(topic, cluster)
        snapshot.set(f.OPEN_TRANSACTIONS, labels, open_count)
        snapshot.set(f.HANGING_TRANSACTIONS, labels, hanging)
