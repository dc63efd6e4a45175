"""The `offsets` sample files an audit reads, newest first, each at most once.

The newest files give every partition's latest offsets and its topic's id: what the ranges
are planned from (ranges.py). Older files are read only when a range needs them: the LSO
history its records became readable in (arrivals.py), back to each partition's last sample
whose LSO was at most the range's start.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dgm.contracts.sample_schemas import SCHEMAS
from dgm.contracts.samples import Key, PartitionOffsets, SampleStore

_OFFSETS = ["topic", "partition", "log_start_offset", "high_watermark", "lso"]
# What the LSO history keeps of a sample (arrivals.segments reads these).
HISTORY = ["sampled_at", "topic", "partition", "lso"]
_READ = pa.schema([SCHEMAS["offsets"].field(c) for c in [*HISTORY, *_OFFSETS[2:4], "topic_id"]])


class OffsetsSamples:
    """The offsets samples of `topics`: the newest `max_files` files read at once (fewer when
    every topic is seen sooner), older ones as `history` needs them."""

    def __init__(self, state_dir: Path, topics: Collection[str], max_files: int) -> None:
        self.topics = pa.array(sorted(set(topics)), pa.string())
        files = SampleStore(state_dir).readable_files("offsets") if len(self.topics) else []
        self._unread = files[::-1]  # newest first
        self._read: list[pa.Table] = []  # newest first, rows of `topics` only
        seen: set[str] = set()
        while self._unread and len(self._read) < max_files and len(seen) < len(self.topics):
            seen.update(self._next()["topic"].to_pylist())
        self._newest = list(self._read)

    def _next(self) -> pa.Table:
        table = pq.read_table(self._unread.pop(0), columns=_READ.names, schema=_READ)
        table = table.filter(pc.is_in(table["topic"], self.topics))
        self._read.append(table)
        return table

    def latest(self) -> list[PartitionOffsets]:
        """Each partition's newest sampled offsets, sorted by topic and partition. A partition
        missing from the newest file (its leader was unavailable) waits for a later cycle,
        unless an older file was read anyway for another topic: older offsets are safe, only
        less far."""
        latest: dict[Key, PartitionOffsets] = {}
        for table in self._newest:
            for row in table.select(_OFFSETS).to_pylist():
                latest.setdefault((row["topic"], row["partition"]), PartitionOffsets(**row))
        return sorted(latest.values(), key=lambda s: (s.topic, s.partition))

    def last_sampled(self, partitions: Collection[Key]) -> dict[Key, datetime | None]:
        """When the sample latest() takes each of `partitions`' offsets from was taken: the
        audit reads the partition up to them, so it holds its records up to that time, not
        up to the newest file's. None for a partition latest() lacks (missing from the newest
        files, its leader away): this cycle does not read it at all."""
        found: dict[Key, datetime | None] = dict.fromkeys(partitions)
        taken: set[Key] = set()
        for table in self._newest:
            for row in table.select(["topic", "partition", "sampled_at"]).to_pylist():
                key = (row["topic"], row["partition"])
                if key in found and key not in taken:  # latest()'s row: the first one
                    found[key] = row["sampled_at"]
                    taken.add(key)
        return found

    def topic_ids(self) -> dict[str, str]:
        """Kafka's id of each topic in the newest samples that name one."""
        found: dict[str, str] = {}
        for table in self._newest:
            for row in table.select(["topic", "topic_id"]).to_pylist():
                if row["topic_id"] is not None:
                    found.setdefault(row["topic"], row["topic_id"])
        return found

    def history(self, starts: Mapping[Key, int]) -> pa.Table:
        """The samples (HISTORY columns) of the partitions of `starts` (partition -> an
        offset), reading older files until each has one whose LSO was at most its offset, or
        none are left. Rows of a sample read are all kept: arrivals.segments takes the LSO's
        running maximum over them."""
        wanted = pa.table(
            {
                "topic": pa.array([t for t, _ in starts], pa.string()),
                "partition": pa.array([p for _, p in starts], pa.int32()),
                "_start": pa.array(list(starts.values()), pa.int64()),
            }
        )
        pending, found, index = set(starts), [], 0
        while pending and (index < len(self._read) or self._unread):
            table = self._read[index] if index < len(self._read) else self._next()
            index += 1
            mine = table.select(HISTORY).join(wanted, ["topic", "partition"], join_type="inner")
            found.append(mine.select(HISTORY))
            below = mine.filter(pc.less_equal(mine["lso"], mine["_start"]))
            topics, partitions = below["topic"].to_pylist(), below["partition"].to_pylist()
            pending -= set(zip(topics, partitions, strict=True))
        schema = pa.schema([_READ.field(c) for c in HISTORY])
        return pa.concat_tables([t.cast(schema) for t in found]) if found else schema.empty_table()
