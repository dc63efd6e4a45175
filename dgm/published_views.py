"""The DuckDB views published with the tables of dgm.published: one level of detail each.

Two tables mix levels of detail and mark one with NULL (`topic_windows`: window_start null is
the cumulative row; `group_status`: topic null is the group's own row), and the collectors'
series are read at their newest sample. Each rule is written once, here, as a view created in
the published file itself (so it resolves there, also when a reader ATTACHes the file
read-only); readers select from the view and never repeat the rule. The columns are the
table's, documented in dgm.published.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from dgm.published import GROUP_LAG, GROUP_STATUS, PARTITION_OFFSETS, TOPIC_WINDOWS


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

VIEWS: tuple[View, ...] = (
    CUMULATIVE_TOPICS,
    TOPIC_WINDOW_SERIES,
    GROUP_STATUS_BY_GROUP,
    GROUP_STATUS_BY_PARTITION,
    LATEST_PARTITION_OFFSETS,
    LATEST_GROUP_LAG,
)


def create_views(connection: duckdb.DuckDBPyConnection) -> None:
    """Every view, in the database `connection` writes (after its tables exist)."""
    for view in VIEWS:
        connection.execute(view.ddl())
