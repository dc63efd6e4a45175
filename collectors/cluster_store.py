"""The sample store as the collector of a cluster other than the default one sees it.

Several clusters' collectors write into one sample store (docs/design.md, "Several
clusters"). A named cluster's rows carry qualified names ('<cluster>/<topic>',
dgm.contracts.clusters)
in every column that names a topic or a consumer group, and in `cluster_id` (the Kafka
cluster id, so every row says which configured cluster it came from, even two configured
names for one Kafka cluster). The collector itself keeps working with plain names: rows are
qualified on write and read back plain (its state after a restart).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dgm.contracts.clusters import qualified
from dgm.contracts.samples import SampleStore, rows_table

# Per sample kind, its columns holding a topic or group name, and those holding partitions
# as a list of {topic, partition}.
NAME_COLUMNS: dict[str, tuple[str, ...]] = {
    "offsets": ("cluster_id", "topic"),
    "group_offsets": ("cluster_id", "group_id", "topic"),
    "group_members": ("cluster_id", "group_id"),
    "producers": ("cluster_id", "topic"),
    "transactions": ("cluster_id",),
    "events": ("cluster_id", "group_id", "topic"),
}
PARTITION_LIST_COLUMNS: dict[str, tuple[str, ...]] = {
    "group_members": ("assignment",),
    "transactions": ("partitions",),
}


def _renamed_lists(column: pa.ChunkedArray, rename: Any) -> pa.ChunkedArray:
    """A list<struct<topic, partition>> column with each topic renamed (a few rows per group
    or transaction: plain Python is fast enough)."""
    values = [
        None if items is None else [{**item, "topic": rename(item["topic"])} for item in items]
        for items in column.to_pylist()
    ]
    return pa.chunked_array([pa.array(values, column.type)], column.type)


def _with_names(table: pa.Table, kind: str, strings: Any, rename: Any) -> pa.Table:
    for name in NAME_COLUMNS[kind]:
        index = table.schema.get_field_index(name)
        table = table.set_column(index, table.schema.field(index), strings(table[name]))
    for name in PARTITION_LIST_COLUMNS.get(kind, ()):
        index = table.schema.get_field_index(name)
        column = _renamed_lists(table[name], rename)
        table = table.set_column(index, table.schema.field(index), column)
    return table


def qualified_table(table: pa.Table, kind: str, cluster: str) -> pa.Table:
    """A `kind` sample table of `cluster` with its names qualified."""
    prefix = qualified(cluster, "")
    return _with_names(
        table,
        kind,
        lambda column: pc.binary_join_element_wise(prefix, column, ""),
        lambda topic: qualified(cluster, topic),
    )


def plain_table(table: pa.Table, kind: str, cluster: str) -> pa.Table:
    """The inverse of qualified_table, for the rows of `cluster` (others are left as they are)."""
    prefix = qualified(cluster, "")
    pattern = "^" + re.escape(prefix)
    return _with_names(
        table,
        kind,
        lambda column: pc.replace_substring_regex(column, pattern=pattern, replacement=""),
        lambda topic: topic[len(prefix) :] if topic.startswith(prefix) else topic,
    )


class ClusterSampleStore(SampleStore):
    """The store of `state_dir`, writing `cluster`'s rows with qualified names and reading
    them back plain."""

    def __init__(self, state_dir: Path, cluster: str) -> None:
        super().__init__(state_dir)
        self.cluster = cluster

    def write(self, kind: str, rows: Iterable[Any]) -> Path:
        return self.write_table(kind, qualified_table(rows_table(kind, rows), kind, self.cluster))

    def read(self, kind: str, paths: Iterable[Path] | None = None) -> pa.Table:
        return plain_table(super().read(kind, paths), kind, self.cluster)
