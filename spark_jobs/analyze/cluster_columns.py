"""The published `cluster` columns, each from its row's topic or group (dgm.contracts.clusters)."""

from __future__ import annotations

from collections.abc import Mapping

from dgm.config.document import DgmConfig
from dgm.contracts import published as tables
from dgm.contracts.clusters import cluster_column
from spark_jobs.analyze.publish import Published, arrow_of

# Table -> the column naming what its `cluster` column says the cluster of.
NAMED_BY = {
    tables.TOPIC_WINDOWS: "topic",
    tables.PARTITION_WINDOWS: "topic",
    tables.DUPLICATES: "topic",
    tables.LOST: "topic",
    tables.PARTITION_OFFSETS: "topic",
    tables.GROUP_LAG: "group_id",
    tables.GROUP_STATUS: "group_id",  # its group rows name no topic
    tables.TRANSACTIONS: "topic",
    tables.PRODUCER_SESSIONS: "topic",
    tables.OUT_OF_ORDER: "topic",
    tables.LOG_ANOMALIES: "topic",
}


def with_cluster_columns(found: Mapping[str, Published], config: DgmConfig) -> dict[str, Published]:
    """`found` (name -> rows) with the `cluster` column of NAMED_BY's tables filled."""
    result = dict(found)
    for table, column in NAMED_BY.items():
        if table.name not in result:
            continue
        data = arrow_of(result[table.name], table)
        clusters = cluster_column(data[column], config.clusters)
        if "cluster" in data.column_names:
            data = data.set_column(data.column_names.index("cluster"), "cluster", clusters)
        else:
            data = data.append_column("cluster", clusters)
        result[table.name] = data
    return result
