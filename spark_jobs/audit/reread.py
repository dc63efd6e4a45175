"""Audited offsets read again: logs truncated and rewritten (docs/design.md, "Log integrity").

The audit reads each range once. A truncation (an unclean leader election, a broker bug)
removes records it audited and lets other records take their offsets, which no later audit
reads. So part of the audited offsets are read again each cycle and their ids compared, offset
by offset, with the fingerprints kept:

- around every backwards move the collectors recorded (a high watermark, LSO or log start
  going back: collectors/events.py) and every partition whose sampled high watermark lies
  below what was audited: from as far below the lower offset as the move went back;
- a share of each cycle's audit: `analysis.reread_share` x the offsets the cycle audits,
  owed until it adds up to REREAD_CHUNK offsets (one Spark read then, not a small one every
  cycle), spread over the audited partitions, each walked down from its newest audited
  offset to its oldest held one, then again from the newest.

A truncation cuts a partition's log at one offset and lets the log grow again from there, so
a partition **diverges** at the lowest offset whose record is gone (its id differs now, or the
offset lies at or past the sampled high watermark). When the offsets read begin with a
divergence, the divergence may lie lower: the window is read again below, twice as wide, until
it begins with an offset that holds what was audited (or reaches the oldest one held).

From its divergence on, a partition's fingerprints are **displaced** where Kafka no longer
holds them as audited: a committed one is a truncated record (lost, cause truncation), one
whose offset holds another id now marks an inconsistent offset. The batches holding the
partition's offsets from the divergence on are rewritten as one batch (crash-safe, like a
compaction): the displaced rows leave the fingerprints for the batch's `_anomalies` (Spark
skips files and folders whose name begins with `_`), the records now at those offsets are
fingerprinted in their place up to the sampled LSO, and the partition's audited range ends
there, so the next audit goes on from it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from dgm.config.pipelines import MessageIdRule
from dgm.contracts.fingerprints import FINGERPRINT as FINGERPRINT_FIELDS
from dgm.contracts.sample_schemas import SCHEMAS
from dgm.contracts.samples import Key, PartitionOffsets, SampleStore
from dgm.util.durable import fsync
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.audit.record_columns import fingerprints
from spark_jobs.audit.registry_columns import Lookups, batch_schemas, no_lookups

STATE_FILE = "reread.json"
# Offsets a share re-read waits to owe before it reads: a Spark job's fixed cost (~0.5 s)
# spent on a few offsets every cycle would cost more than the offsets themselves.
REREAD_CHUNK = 10_000
# The collectors' events that say a partition's log went back (collectors/events.py).
BACKWARDS_EVENTS = ("high_watermark_backwards", "lso_backwards", "log_start_backwards")
WENT_BACK = "went back"
SHARE = "share"


@dataclass(frozen=True)
class Reread:
    """Offsets [start, end) of one partition to read again and compare."""

    topic: str
    partition: int
    start: int
    end: int
    high_watermark: int  # sampled: audited offsets at or past it are gone
    lso: int  # sampled: where the audit resumes after a divergence
    why: str  # WENT_BACK or SHARE

    @property
    def key(self) -> Key:
        return self.topic, self.partition

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


@dataclass
class RereadState:
    """What the re-read carries from cycle to cycle, in `<fingerprints>/reread.json`. Losing it
    costs nothing but work: backwards moves are read again (the re-read of a partition that
    was already rewritten finds nothing), the walk starts again from the newest offsets."""

    events_after: str | None = None  # the newest events sample file already looked at
    cursors: dict[str, int] = field(default_factory=dict)  # "topic/partition" -> walk's next end
    owed: int = 0  # share offsets owed, not read yet

    @staticmethod
    def load(folder: Path) -> RereadState:
        try:
            data = json.loads((folder / STATE_FILE).read_text())
            return RereadState(data.get("events_after"), dict(data["cursors"]), int(data["owed"]))
        except (OSError, ValueError, KeyError, TypeError):
            return RereadState()

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        temp = folder / f".{STATE_FILE}.tmp"
        temp.write_text(json.dumps(asdict(self), sort_keys=True))
        fsync(temp)
        os.replace(temp, folder / STATE_FILE)
        fsync(folder)


def _name(key: Key) -> str:
    return f"{key[0]}/{key[1]}"


Moves = dict[Key, tuple[int, int]]


def went_back(store: SampleStore, after: str | None) -> tuple[Moves, str | None]:
    """Per partition, from the backwards events in the events samples written after the file
    named `after`: (the lowest offset it went back to, the widest step back); and the newest
    events file looked at (None when there is none)."""
    files = store.files_after("events", after)
    found: Moves = {}
    for path in files:
        table = pq.read_table(path, schema=SCHEMAS["events"])
        table = table.filter(pc.is_in(table["event"], pa.array(BACKWARDS_EVENTS)))
        for row in table.select(["topic", "partition", "before", "after"]).to_pylist():
            if row["topic"] is None or row["partition"] is None:
                continue
            key = (row["topic"], row["partition"])
            low, step = found.get(key, (row["after"], 0))
            found[key] = (min(low, row["after"]), max(step, row["before"] - row["after"]))
    newest = files[-1].name if files else after
    return found, newest


def plan_rereads(
    sampled: Iterable[PartitionOffsets],
    audited: Mapping[Key, int],
    held: Mapping[Key, int],
    moved: Moves,
    state: RereadState,
    new_offsets: int,
    share: float,
    chunk: int = REREAD_CHUNK,
) -> tuple[list[Reread], RereadState]:
    """What to read again this cycle, and the state to keep if it is read.

    `audited`: per partition the end of what was audited; `held`: the lowest audited offset
    the fingerprints hold from; `moved`: went_back's; `new_offsets`: what this cycle audits.
    """
    owed = state.owed + math.ceil(share * new_offsets)
    cursors = dict(state.cursors)
    found: list[Reread] = []
    by_key = {(s.topic, s.partition): s for s in sampled}
    around: set[Key] = set()
    for key, s in sorted(by_key.items()):
        end = audited.get(key)
        if end is None:
            continue
        floor = max(s.log_start_offset, held.get(key, 0))
        low, step = moved.get(key, (None, 0))
        if s.high_watermark < end:  # shorter than audited, seen or not
            low = s.high_watermark if low is None else min(low, s.high_watermark)
            step = max(step, end - s.high_watermark)
        if low is None:
            continue
        start = max(floor, min(low, end) - max(step, 1))
        found.append(
            Reread(key[0], key[1], start, min(end, s.high_watermark), s.high_watermark, s.lso,
                   WENT_BACK)
        )  # fmt: skip
        around.add(key)
    walked = [k for k in sorted(by_key) if k in audited and k not in around]
    if owed >= chunk and walked:
        each = math.ceil(owed / len(walked))
        for key in walked:
            s, end = by_key[key], min(audited[key], by_key[key].high_watermark)
            floor = max(s.log_start_offset, held.get(key, 0))
            top = min(cursors.get(_name(key), end), end)
            if top <= floor:
                top = end  # walked down to the oldest held offset: again from the newest
            start = max(floor, top - each)
            if start < top:
                found.append(Reread(key[0], key[1], start, top, s.high_watermark, s.lso, SHARE))
            cursors[_name(key)] = start if start > floor else end
        owed = 0
    return found, RereadState(state.events_after, cursors, owed)


def below(r: Reread, floor: int) -> Reread | None:
    """The window under `r`, twice as wide, not below `floor`; None when none is left."""
    start = max(floor, r.start - 2 * max(r.size, 1))
    if start >= r.start:
        return None
    return Reread(r.topic, r.partition, start, r.start, r.high_watermark, r.lso, r.why)


def resume_at(audited_end: int, divergence: int, lso: int) -> int:
    """Where a diverged partition's audited range ends after the rewrite: the sampled LSO (the
    audit fingerprints nothing past it), never past what was audited, never below the
    divergence (offsets below it hold what was audited)."""
    return max(divergence, min(audited_end, lso))


# -- Spark: the comparison ------------------------------------------------------------------

NOW_SCHEMA = (
    "topic string, partition int, offset long, now_id string, now_timestamp timestamp, "
    "now_key string, now_seen boolean"
)


def _scope(spark: SparkSession, windows: Sequence[Reread]) -> DataFrame:
    rows = [(w.topic, w.partition, w.start, w.end, w.high_watermark) for w in windows]
    schema = "topic string, partition int, w_start long, w_end long, w_hw long"
    return F.broadcast(spark.createDataFrame(rows, schema))


def now_ids(
    spark: SparkSession,
    read: Callable[[Sequence[OffsetRange]], DataFrame],
    windows: Sequence[Reread],
    rules: Mapping[str, MessageIdRule],
    lookups: Lookups = no_lookups,
) -> DataFrame:
    """NOW_SCHEMA rows: the records in `windows` as Kafka holds them now (`read`: the Spark
    Kafka source's rows of ranges, read_uncommitted), ids found by each topic's rule (and,
    for registry_field, the schemas of its cluster's registry: `lookups`)."""
    by_rule: dict[tuple[MessageIdRule, Any], list[OffsetRange]] = {}
    for w in windows:
        if w.size > 0:
            r = OffsetRange(w.topic, w.partition, w.start, w.end)
            by_rule.setdefault((rules[w.topic], lookups(w.topic)), []).append(r)
    frames = []
    for (rule, lookup), mine in by_rule.items():
        records = read(mine)
        frames.append(fingerprints(records, rule, batch_schemas(records, rule, lookup)))
    if not frames:
        return spark.createDataFrame([], NOW_SCHEMA)
    return reduce(DataFrame.unionByName, frames).select(
        "topic", "partition", "offset",
        F.col("message_id").alias("now_id"),
        F.col("timestamp").alias("now_timestamp"),
        F.col("key").alias("now_key"),
        F.lit(True).alias("now_seen"),
    )  # fmt: skip


def _differs() -> Column:
    """The record at the offset is another one: another id; without ids on either side,
    another timestamp or key."""
    same_id = F.col("message_id").eqNullSafe(F.col("now_id"))
    unidentified = F.col("message_id").isNull() & F.col("now_id").isNull()
    same_stamp = F.col("timestamp").eqNullSafe(F.col("now_timestamp"))
    same_record = same_stamp & F.col("key").eqNullSafe(F.col("now_key"))
    return ~same_id | (unidentified & ~same_record)


def compared(stored: DataFrame, now: DataFrame, windows: Sequence[Reread]) -> DataFrame:
    """The stored fingerprints of `windows` (and those at or past each partition's sampled
    high watermark) beside what their offsets hold now: `gone` (past the high watermark),
    `changed` (another record there now), `same` (the record audited), or none of the three
    (nothing there now below the high watermark: a hole, which compaction makes too)."""
    inside = (F.col("offset") >= F.col("w_start")) & (
        (F.col("offset") < F.col("w_end")) | (F.col("offset") >= F.col("w_hw"))
    )
    held = stored.join(_scope(stored.sparkSession, windows), ["topic", "partition"])
    joined = held.where(inside).join(now, ["topic", "partition", "offset"], "left")
    gone = F.col("offset") >= F.col("w_hw")
    there = F.coalesce(F.col("now_seen"), F.lit(False)) & ~gone
    return (
        joined.withColumn("gone", gone)
        .withColumn("changed", there & _differs())
        .withColumn("same", there & ~_differs())
    )


@dataclass(frozen=True)
class Divergence:
    """Where a partition's log no longer holds what was audited."""

    at: int  # the lowest offset gone or holding another record
    settled: bool  # an offset below it, in the window read, still holds what was audited


def divergences(rows: DataFrame) -> dict[Key, Divergence]:
    """Per partition of `compared` rows that diverges: its Divergence."""
    found = rows.groupBy("topic", "partition").agg(
        F.min(F.when(F.col("gone") | F.col("changed"), F.col("offset"))).alias("at"),
        F.min(F.when(F.col("same"), F.col("offset"))).alias("first_same"),
    )
    result = {}
    for row in found.where(F.col("at").isNotNull()).collect():
        settled = row["first_same"] is not None and row["first_same"] < row["at"]
        result[(row["topic"], row["partition"])] = Divergence(int(row["at"]), settled)
    return result


# The stored columns the comparison needs (a share's re-read scans many batches: fewer
# columns read from their Parquet files).
COMPARED = ("topic", "partition", "offset", "message_id", "timestamp", "key", "committed")


def find_divergences(
    stored: Callable[[Sequence[Reread]], DataFrame],
    read_now: Callable[[Sequence[Reread]], DataFrame],
    windows: Sequence[Reread],
    floors: Mapping[Key, int],
    rounds: int = 24,
) -> dict[Key, int]:
    """Per diverging partition the offset its log diverges at: `windows` compared, then, for
    a partition whose divergence no offset below it confirms, the window under it (`below`),
    until one does or its floor (the oldest offset held) is reached. `stored(windows)`: the
    stored fingerprints of the windows (COMPARED columns at least)."""
    found: dict[Key, int] = {}
    for _ in range(rounds):
        if not windows:
            break
        here = divergences(compared(stored(windows), read_now(windows), windows))
        lower = []
        for w in windows:
            d = here.get(w.key)
            if d is None:
                continue
            found[w.key] = min(d.at, found.get(w.key, d.at))
            if not d.settled and (next_window := below(w, floors.get(w.key, 0))) is not None:
                lower.append(next_window)
        windows = lower
    return found


def displaced(stored: DataFrame, now: DataFrame, diverged: Sequence[Reread]) -> DataFrame:
    """The stored fingerprints from each partition's divergence on (`diverged`: one window
    per partition, from its divergence to its audited end or high watermark) that Kafka no
    longer holds as audited, with `overwritten` (another record holds their offset now) and
    `now_message_id` (its id)."""
    rows = compared(stored, now, diverged).where(~F.col("same"))
    return rows.select(
        *(f.name for f in FINGERPRINT_FIELDS),
        F.col("changed").alias("overwritten"),
        F.when(F.col("changed"), F.col("now_id")).alias("now_message_id"),
    )
