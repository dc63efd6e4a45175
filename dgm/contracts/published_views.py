"""The DuckDB views published with the tables of dgm.contracts.published: one level of detail each.

Two tables mix levels of detail and mark one with NULL (`topic_windows`: window_start null is
the cumulative row; `group_status`: topic null is the group's own row), and the collectors'
series are read at their newest sample; the windows' counts also at the last closed window
(the counts alerts can clear on). Each rule is written once, here, as a view created in
the published file itself (so it resolves there, also when a reader ATTACHes the file
read-only); readers select from the view and never repeat the rule. The columns are the
table's, documented in dgm.contracts.published.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from dgm.clients.capabilities import CAPABILITY_MISSING, CAPABILITY_RESTORED
from dgm.clients.permissions import AUTHORIZATION_FAILED, AUTHORIZATION_RESTORED
from dgm.contracts.published import (
    FAULTS,
    GROUP_LAG,
    GROUP_STATUS,
    PARTITION_OFFSETS,
    PIPELINE_WINDOWS,
    RUNS,
    TOPIC_WINDOWS,
    VERDICTS,
)


@dataclass(frozen=True)
class View:
    name: str
    doc: str
    sql: str

    def ddl(self) -> str:
        return f'CREATE VIEW "{self.name}" AS {self.sql}'


CUMULATIVE_TOPICS = View(
    "cumulative_topics",
    f"Per topic, over the fingerprint retention: the {TOPIC_WINDOWS.name} rows whose "
    "window_start is null, without that column.",
    f"SELECT * EXCLUDE (window_start) FROM {TOPIC_WINDOWS.name} WHERE window_start IS NULL",
)

TOPIC_WINDOW_SERIES = View(
    "topic_window_series",
    f"Per topic and window: the {TOPIC_WINDOWS.name} rows of one window each.",
    f"SELECT * FROM {TOPIC_WINDOWS.name} WHERE window_start IS NOT NULL",
)

# The counts of a window that has ended stop growing (but for records still in their grace
# period), and a series of them falls back to 0 when a problem stops: what an alert that
# should clear needs. The newest window has not ended, and totals never go down.
LAST_CLOSED_WINDOW = View(
    "last_closed_window",
    "One row: the start and length (window_s) of the newest window that had ended when the "
    f"published run's newest collector sample was taken ({RUNS.name}.last_sample_at, or "
    "finished_at without samples). Windows start at multiples of window_s seconds since the "
    "epoch; the window is the one before the sample's own.",
    "SELECT to_timestamp((floor(epoch(coalesce(last_sample_at, finished_at)) / window_s) - 1) "
    f"* window_s) AS window_start, window_s FROM {RUNS.name} ORDER BY finished_at DESC LIMIT 1",
)

_PIPELINE_COUNTS = (
    "records_checked",
    "duplicate_copies",
    "lost",
    "aborted_reads",
    "beyond_retention",
    "late_records",
    "faults_observed",
    "filtered",
    "filter_undecided",
    "torn_commits",
    "producer_out_of_order",
    "sink_out_of_order",
    "truncated_records",
    "inconsistent_offsets",
    "latency_measured",
)
LAST_WINDOW_PIPELINES = View(
    "last_window_pipelines",
    f"Per pipeline of {VERDICTS.name}: its {PIPELINE_WINDOWS.name} row of the last closed "
    "window; a pipeline without one (nothing in that window) has counts 0 and null rates.",
    "SELECT v.pipeline, w.window_start, "
    + ", ".join(f"coalesce(pw.{c}, 0) AS {c}" for c in _PIPELINE_COUNTS)
    + ", pw.duplicate_rate, pw.loss_rate, v.sample_one_in, "
    + "pw.latency_p50_s, pw.latency_p95_s, pw.latency_p99_s, "
    + ", ".join(
        f"pw.{rate}_{end}" for rate in ("duplicate_rate", "loss_rate") for end in ("low", "high")
    )
    + " "
    f"FROM {VERDICTS.name} v CROSS JOIN last_closed_window w "
    f"LEFT JOIN {PIPELINE_WINDOWS.name} pw "
    "ON pw.pipeline = v.pipeline AND pw.window_start = w.window_start",
)

_TOPIC_COUNTS = (
    "records",
    "distinct_ids",
    "duplicate_copies",
    "unidentified",
    "aborted",
    "out_of_order",
    "truncated_records",
    "inconsistent_offsets",
)
LAST_WINDOW_TOPICS = View(
    "last_window_topics",
    "Per topic of cumulative_topics: its row of the last closed window; a topic without one "
    "(nothing in that window) has counts 0 and a null rate.",
    "SELECT c.topic, c.cluster, w.window_start, "
    + ", ".join(f"coalesce(t.{name}, 0) AS {name}" for name in _TOPIC_COUNTS)
    + ", t.duplicate_rate "
    "FROM cumulative_topics c CROSS JOIN last_closed_window w "
    "LEFT JOIN topic_window_series t ON t.topic = c.topic AND t.window_start = w.window_start",
)

GROUP_STATUS_BY_GROUP = View(
    "group_status_by_group",
    f"Per consumer group, its own row of {GROUP_STATUS.name} (its worst partition's status), "
    "without the topic and partition columns.",
    f'SELECT * EXCLUDE (topic, "partition") FROM {GROUP_STATUS.name} WHERE topic IS NULL',
)

GROUP_STATUS_BY_PARTITION = View(
    "group_status_by_partition",
    f"Per consumer group and partition: the partition rows of {GROUP_STATUS.name}.",
    f"SELECT * FROM {GROUP_STATUS.name} WHERE topic IS NOT NULL",
)

LATEST_PARTITION_OFFSETS = View(
    "latest_partition_offsets",
    f"Every partition of a topic at that topic's newest {PARTITION_OFFSETS.name} sample.",
    f"SELECT * FROM {PARTITION_OFFSETS.name} "
    "QUALIFY sampled_at = max(sampled_at) OVER (PARTITION BY topic)",
)

LATEST_GROUP_LAG = View(
    "latest_group_lag",
    f"Every partition of a consumer group at that group's newest {GROUP_LAG.name} sample.",
    f"SELECT * FROM {GROUP_LAG.name} "
    "QUALIFY sampled_at = max(sampled_at) OVER (PARTITION BY group_id)",
)


def _not_restored(missing: str, restored: str, more_columns: str = "") -> str:
    """Each `detail` whose newest event since the newest collector_start is `missing`, not
    `restored` (a collector records again, once, what is still missing), with when (since)."""
    return f"""SELECT detail, max("at") AS since{more_columns}
    FROM {FAULTS.name}
    WHERE event IN ('{missing}', '{restored}')
      AND "at" >= (SELECT coalesce(max("at"), TIMESTAMPTZ '1970-01-01 00:00:00+00')
                   FROM {FAULTS.name} WHERE event = 'collector_start')
    GROUP BY detail
    HAVING arg_max(event, "at") = '{missing}'"""


MISSING_PERMISSIONS = View(
    "missing_permissions",
    f"What dgm cannot see now, one row per refused permission: the {AUTHORIZATION_FAILED} "
    f"events of {FAULTS.name} since the newest collector_start (a collector records again, "
    f"once, what it is still refused) not followed by an {AUTHORIZATION_RESTORED}. detail: "
    "'cannot see X: missing permission Y'; since: when it was recorded; pipelines: the "
    "pipelines of its topic or group, comma-separated (null for none).",
    _not_restored(
        AUTHORIZATION_FAILED,
        AUTHORIZATION_RESTORED,
        ", string_agg(DISTINCT pipeline, ', ' ORDER BY pipeline) AS pipelines",
    ),
)

MISSING_CAPABILITIES = View(
    "missing_capabilities",
    f"What the clusters' brokers cannot answer now, one row per capability gap "
    f"(dgm.clients.capabilities): the {CAPABILITY_MISSING} events of {FAULTS.name} since the "
    f"newest collector_start not followed by a {CAPABILITY_RESTORED}, read as "
    f"{MISSING_PERMISSIONS.name} reads refusals. detail: 'cannot see X on cluster C: the "
    "broker (3.6) has no API'; since: when it was recorded.",
    _not_restored(CAPABILITY_MISSING, CAPABILITY_RESTORED),
)

VIEWS: tuple[View, ...] = (
    CUMULATIVE_TOPICS,
    TOPIC_WINDOW_SERIES,
    LAST_CLOSED_WINDOW,
    LAST_WINDOW_PIPELINES,
    LAST_WINDOW_TOPICS,
    GROUP_STATUS_BY_GROUP,
    GROUP_STATUS_BY_PARTITION,
    LATEST_PARTITION_OFFSETS,
    LATEST_GROUP_LAG,
    MISSING_PERMISSIONS,
    MISSING_CAPABILITIES,
)


def create_views(connection: duckdb.DuckDBPyConnection) -> None:
    """Every view, in the database `connection` writes (after its tables exist)."""
    for view in VIEWS:
        connection.execute(view.ddl())


def read_missing_permissions(db: duckdb.DuckDBPyConnection) -> list[str]:
    """The lines of MISSING_PERMISSIONS ('cannot see X: missing permission Y'), sorted; none
    from a publication made before the view existed."""
    return _details(db, MISSING_PERMISSIONS)


def read_missing_capabilities(db: duckdb.DuckDBPyConnection) -> list[str]:
    """The lines of MISSING_CAPABILITIES ('cannot see X on cluster C: the broker (3.6) has no
    API'), sorted; none from a publication made before the view existed."""
    return _details(db, MISSING_CAPABILITIES)


def _details(db: duckdb.DuckDBPyConnection, view: View) -> list[str]:
    try:
        found = db.execute(f'SELECT detail FROM "{view.name}" ORDER BY detail')
    except duckdb.CatalogException:
        return []
    return [str(row[0]) for row in found.fetchall()]
