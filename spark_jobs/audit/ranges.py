"""Which offsets the audit reads next: per topic-partition, from what was audited to the LSO.

The end of a range is the last sampled LSO (last stable offset), never the high watermark.
Below the LSO every transactional record's fate is decided: its transaction has written its
commit or abort marker, so a read_uncommitted and a read_committed read of the range agree
for good on which records are committed. Above the LSO sits at least one open transaction:
its records are in the log but may still be committed or aborted, and fingerprinting them
now would freeze a guess. They are audited once the LSO has passed them.

The start is where the previous audit of the partition ended, or the log start offset when
retention has already deleted records from there: those offsets are reported as skipped,
not treated as an error (they are gone from Kafka and no audit can read them any more).

A partition never audited starts where `analysis.start` says (`first_starts`): its log start
(earliest), or a later offset (latest, or a duration ago). The offsets below such a start are
recorded in the range as `before_start`; the range is kept even when empty, so the first
audit's position is stored and the start is never re-decided (a "latest" start moving on
each run would skip records).

The pure part (`plan_ranges`) takes sampled offsets and audited positions; the readers take
only the newest sample files, which the collectors name by time.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dgm.contracts.sample_schemas import SCHEMAS
from dgm.contracts.samples import Key, PartitionOffsets, SampleStore
from spark_jobs.audit.offsets_samples import OffsetsSamples

# Newest sample files read to find every monitored topic: one cycle writes one file, so the
# newest file normally has everything; older ones only fill in a topic missing from it.
MAX_SAMPLE_FILES = 5


@dataclass(frozen=True)
class OffsetRange:
    """Offsets [start, end) of one partition to audit; `skipped` offsets below `start` were
    deleted by retention before any audit read them; `before_start` offsets below `start`
    precede the first audit's start (`analysis.start`) and are never audited."""

    topic: str
    partition: int
    start: int
    end: int
    skipped: int = 0
    before_start: int = 0

    @property
    def key(self) -> Key:
        return self.topic, self.partition

    @property
    def size(self) -> int:
        """Offsets in the range; records plus control markers (and compacted-away offsets)."""
        return self.end - self.start


def plan_ranges(
    sampled: Iterable[PartitionOffsets],
    audited: Mapping[Key, int],
    first_starts: Mapping[Key, int] | None = None,
) -> list[OffsetRange]:
    """The range to audit per sampled partition, sorted by topic and partition.

    start = max(audited end, log start offset); end = the sampled LSO. A partition never
    audited starts at its `first_starts` offset, kept within [log start, LSO], else at its
    log start offset (nothing is reported skipped for it). An LSO at or below the start
    (nothing new, or a sample older than the last audit) gives no range, except for a never
    audited partition with a first start: its empty range records where the audit starts.
    """
    found = []
    for s in sampled:
        key = (s.topic, s.partition)
        done = audited.get(key)
        if done is None:
            first = (first_starts or {}).get(key)
            if first is None:
                if s.lso > s.log_start_offset:
                    found.append(OffsetRange(s.topic, s.partition, s.log_start_offset, s.lso))
                continue
            start = max(s.log_start_offset, min(first, s.lso))
            before = start - s.log_start_offset
            found.append(OffsetRange(s.topic, s.partition, start, max(start, s.lso), 0, before))
            continue
        start = max(done, s.log_start_offset)
        if s.lso > start:
            skipped = max(0, s.log_start_offset - done)
            found.append(OffsetRange(s.topic, s.partition, start, s.lso, skipped))
    return sorted(found, key=lambda r: r.key)


def split_ranges(
    ranges: Sequence[OffsetRange], max_offsets: int, max_chunks: int = 64
) -> list[list[OffsetRange]]:
    """`ranges` cut into chunks of about `max_offsets` offsets (at most `max_chunks` chunks),
    each chunk a slice of every range, so a chunk still reads all partitions in parallel.
    Together the chunks cover every offset of every non-empty range exactly once."""
    reading = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in reading)
    count = min(max_chunks, max(1, -(-total // max(1, max_offsets))))
    chunks: list[list[OffsetRange]] = []
    for index in range(count):
        chunk = []
        for r in reading:
            step = -(-r.size // count)
            start, end = r.start + index * step, min(r.end, r.start + (index + 1) * step)
            if end > start:
                chunk.append(OffsetRange(r.topic, r.partition, start, end))
        if chunk:
            chunks.append(chunk)
    return chunks


def offsets_json(ranges: Iterable[OffsetRange], end: bool) -> str:
    """Spark Kafka source startingOffsets (end=False) or endingOffsets (end=True) JSON."""
    by_topic: dict[str, dict[str, int]] = {}
    for r in ranges:
        by_topic.setdefault(r.topic, {})[str(r.partition)] = r.end if end else r.start
    return json.dumps(by_topic, sort_keys=True)


def assign_json(ranges: Iterable[OffsetRange]) -> str:
    """Spark Kafka source `assign` JSON: exactly the partitions of `ranges`."""
    by_topic: dict[str, list[int]] = {}
    for r in ranges:
        by_topic.setdefault(r.topic, []).append(r.partition)
    return json.dumps({t: sorted(ps) for t, ps in sorted(by_topic.items())})


def _newest_rows(
    state_dir: Path, kind: str, topics: Collection[str], columns: list[str], max_files: int
) -> list[dict[str, object]]:
    """Rows of the newest `kind` files about `topics`, newest file first; stops at the first
    file after which every topic has been seen."""
    wanted, seen = set(topics), set[str]()
    rows: list[dict[str, object]] = []
    if not wanted:
        return rows
    schema = pa.schema([SCHEMAS[kind].field(c) for c in columns])
    for path in reversed(SampleStore(state_dir).readable_files(kind)[-max_files:]):
        table = pq.read_table(path, columns=columns, schema=schema)
        table = table.filter(pc.is_in(table["topic"], pa.array(sorted(wanted))))
        rows.extend(table.to_pylist())
        seen.update(table["topic"].to_pylist())
        if seen >= wanted:
            break
    return rows


def latest_offsets(
    state_dir: Path, topics: Collection[str], max_files: int = MAX_SAMPLE_FILES
) -> list[PartitionOffsets]:
    """The newest sampled offsets of every partition of `topics`, from the newest files only
    (OffsetsSamples.latest)."""
    return OffsetsSamples(state_dir, topics, max_files).latest()


def transactional_topics(
    state_dir: Path, topics: Collection[str], max_files: int = MAX_SAMPLE_FILES
) -> set[str]:
    """Topics of `topics` the newest `producers` sample shows a transactional producer on:
    an open transaction (txn_start_offset), a transactional id, or a coordinator epoch (only a
    transaction marker sets one)."""
    columns = ["topic", "txn_start_offset", "transactional_id", "coordinator_epoch"]
    return {
        str(row["topic"])
        for row in _newest_rows(state_dir, "producers", topics, columns, max_files)
        if row["txn_start_offset"] is not None
        or row["transactional_id"] is not None
        or int(row["coordinator_epoch"]) >= 0  # type: ignore[call-overload]
    }


def has_open_or_recent_transaction(sampled: Iterable[PartitionOffsets]) -> set[str]:
    """Topics with a partition whose LSO sat below its high watermark when sampled: records
    (or a marker) above the LSO, so a transaction touched the partition near the range end."""
    return {s.topic for s in sampled if s.lso < s.high_watermark}


def flagged_topics(
    state_dir: Path,
    topics: Collection[str],
    sampled: Iterable[PartitionOffsets],
    max_files: int = MAX_SAMPLE_FILES,
) -> set[str]:
    """Topics of `topics` to read as transactional: a transactional producer sampled on them
    (transactional_topics), or an open or recent transaction in their `sampled` offsets."""
    return transactional_topics(state_dir, topics, max_files) | has_open_or_recent_transaction(
        s for s in sampled if s.topic in topics
    )
