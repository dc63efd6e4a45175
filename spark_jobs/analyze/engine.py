"""The fingerprint-wide part of an analysis in a handful of Spark queries.

A cycle costs what its queries and their plans cost far more than what its rows cost
(bench/README.md, "A demo cycle's analysis: where the time goes"), so the per-table queries
became: one small aggregate for the context every partition needs (claimed offsets, held
history, dgm-src routes), one shuffle of the fingerprints by message id whose partitions
work out every id's copies, causes, losses and counts (per_id), one shuffle of source
records by producer session for sequence gaps (per_session), and small sums over that
persisted output per published table.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dgm import published as tables
from dgm.config_schema import DgmConfig
from spark_jobs.analyze.frames import Shared, conform
from spark_jobs.analyze.output import PIPELINE_COUNTS, SCHEMA, TOPIC_COUNTS
from spark_jobs.analyze.per_id import COLUMNS as ID_COLUMNS
from spark_jobs.analyze.per_id import Context, per_id_rows
from spark_jobs.analyze.per_session import COLUMNS as SESSION_COLUMNS
from spark_jobs.analyze.per_session import per_session_rows
from spark_jobs.schemas import spark_schema

OUTPUT = spark_schema(SCHEMA)
_MICROS = 1_000_000


def _micros(at: datetime) -> int:
    return round(at.timestamp() * _MICROS)


@dataclass(frozen=True)
class History:
    """What the fingerprints say beyond any one id, from one aggregate query."""

    # (topic, partition) -> timestamp (micros, None when unknown) of the oldest held record,
    # for partitions not held from offset 0 (loss.held_from)
    held_from: dict[tuple[str, int], int | None]
    # (sink topic, src topic, src partition) -> highest committed src_offset
    src_offsets: dict[tuple[str, str, int], int]
    # topic -> topics its records name in dgm-src
    src_topics: dict[str, set[str]]


def history(fingerprints: DataFrame) -> History:
    per_route = fingerprints.groupBy("topic", "partition", "src_topic", "src_partition").agg(
        F.min(F.struct("offset", "timestamp")).alias("first"),
        F.max(F.when(F.col("committed"), F.col("src_offset"))).alias("src_offset"),
    )
    first: dict[tuple[str, int], tuple[int, int | None]] = {}
    src_offsets: dict[tuple[str, str, int], int] = {}
    src_topics: dict[str, set[str]] = defaultdict(set)
    for row in per_route.toArrow().to_pylist():
        where = (row["topic"], row["partition"])
        stamp = row["first"]["timestamp"]
        oldest = (row["first"]["offset"], None if stamp is None else _micros(stamp))
        if where not in first or oldest[0] < first[where][0]:
            first[where] = oldest
        if row["src_topic"] is not None:
            src_topics[row["topic"]].add(row["src_topic"])
            if row["src_partition"] is not None and row["src_offset"] is not None:
                src_offsets[(row["topic"], row["src_topic"], row["src_partition"])] = row[
                    "src_offset"
                ]
    held = {where: stamp for where, (offset, stamp) in first.items() if offset > 0}
    return History(held, src_offsets, dict(src_topics))


def context(
    config: DgmConfig, known: History, committed: dict[tuple[str, str, int], int], now: datetime
) -> Context:
    """The Context of a cycle: roles from `config`, claims from the group's `committed`
    offsets (pipeline, topic, partition) and the external sinks' own rows (loss.claimed_offsets)."""
    sources: dict[str, list[str]] = defaultdict(list)
    sinks: dict[str, list[str]] = defaultdict(list)
    claimed = dict(committed)
    sink_held_from: dict[str, int] = {}
    for p in config.pipelines:
        for topic in p.source_topics:
            sources[topic].append(p.name)
        external = p.sink_names()[-1] if p.external_sink is not None else None
        for topic in p.sink_names():
            sinks[topic].append(p.name)
            if topic == external:
                for (sink, src, part), offset in known.src_offsets.items():
                    if sink == topic:
                        key = (p.name, src, part)
                        claimed[key] = max(claimed.get(key, offset + 1), offset + 1)
                continue
            stamps = [s for (t, _), s in known.held_from.items() if t == topic and s is not None]
            if p.name in sink_held_from:
                stamps.append(sink_held_from[p.name])
            if stamps:
                sink_held_from[p.name] = max(stamps)
    sink_names = set(sinks)
    return Context(
        sources={t: tuple(ps) for t, ps in sources.items()},
        sinks={t: tuple(ps) for t, ps in sinks.items()},
        source_topics={p.name: tuple(p.source_topics) for p in config.pipelines},
        plain_sources={
            t: tuple(sorted(us)) for t, us in known.src_topics.items() if t not in sink_names
        },
        claimed=claimed,
        sink_held_from=sink_held_from,
        cutoff_us=_micros(now - timedelta(seconds=config.analysis.grace_s)),
        window_us=config.analysis.window_s * _MICROS,
    )


def _in_partitions(
    work: Callable[[pa.Table], pa.Table],
) -> Callable[[Iterable[pa.RecordBatch]], Iterable[pa.RecordBatch]]:
    """`work` on all the rows of a partition at once (an id's rows may span batches)."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        received = list(batches)
        if received:
            yield from work(pa.Table.from_batches(received)).to_batches()

    return run


def output(fingerprints: DataFrame, ctx: Context, known: History) -> DataFrame:
    """Every per_id and per_session row of the fingerprints (output.SCHEMA)."""
    partial = list(known.held_from)
    # A fixed count: AQE would coalesce a shuffle by column into one or two partitions (the
    # rows are few bytes each), and the per-partition Python work then runs on one core.
    parts = int(fingerprints.sparkSession.conf.get("spark.sql.shuffle.partitions") or 4)
    by_id = (
        fingerprints.select(*ID_COLUMNS)
        .repartition(parts, "message_id")
        .mapInArrow(_in_partitions(lambda batch: per_id_rows(batch, ctx)), OUTPUT)
    )
    stamped = fingerprints.where(
        F.col("topic").isin(*ctx.sources) & F.col("producer").isNotNull() & F.col("seq").isNotNull()
    )
    by_session = stamped.select(*SESSION_COLUMNS).repartition(
        parts, "topic", "partition", "producer"
    )
    by_session = by_session.mapInArrow(
        _in_partitions(lambda batch: per_session_rows(batch, ctx, partial)), OUTPUT
    )
    return by_id.unionByName(by_session) if ctx.sources else by_id


def _time(name: str) -> Column:
    return F.timestamp_micros(F.col(name))


def _sums(*names: str) -> list[Column]:
    return [F.sum(n).cast("long").alias(n) for n in names]


def record_tables(rows: DataFrame) -> dict[str, DataFrame]:
    """duplicates, lost, topic_windows and partition_windows from the output rows."""
    kind = F.col("kind")
    records = rows.withColumn("timestamp", _time("timestamp_us"))
    topic = (
        rows.where(kind == "topic")
        .groupBy("topic", "window_us", "total")
        .agg(*_sums(*TOPIC_COUNTS))
    )
    extra = F.when(F.col("total"), F.col("identified") - F.col("distinct_ids")).otherwise(
        F.col("duplicate_copies")
    )
    topic = topic.withColumn("duplicate_copies", extra).select(
        "*",
        _time("window_us").alias("window_start"),
        F.try_divide(F.col("duplicate_copies"), F.col("distinct_ids")).alias("duplicate_rate"),
    )
    partition = (
        rows.where(kind == "partition")
        .groupBy("topic", "partition", "window_us")
        .agg(*_sums("records", "aborted", "duplicate_copies"))
    )
    return {
        tables.TOPIC_WINDOWS.name: conform(topic, tables.TOPIC_WINDOWS),
        tables.PARTITION_WINDOWS.name: conform(
            partition.withColumn("window_start", _time("window_us")), tables.PARTITION_WINDOWS
        ),
        tables.DUPLICATES.name: conform(records.where(kind == "duplicates"), tables.DUPLICATES),
        tables.LOST.name: conform(records.where(kind == "lost"), tables.LOST),
    }


def pipeline_counts(rows: DataFrame) -> DataFrame:
    """(pipeline, window_us, total, counts..., distinct_ids, first/last_checked_us) summed."""
    names = [*PIPELINE_COUNTS, "distinct_ids"]
    return (
        rows.where(F.col("kind") == "pipeline")
        .groupBy("pipeline", "window_us", "total")
        .agg(
            *_sums(*names),
            F.min("first_checked_us").alias("first_checked_us"),
            F.max("last_checked_us").alias("last_checked_us"),
        )
    )


def fingerprint_tables(
    config: DgmConfig,
    fingerprints: DataFrame,
    committed: dict[tuple[str, str, int], int],
    now: datetime,
    shared: Shared,
) -> tuple[dict[str, DataFrame], pa.Table]:
    """(record tables, pipeline counts) of the fingerprints, both from one persisted output
    (the counts already computed: they are few)."""
    known = history(fingerprints)
    ctx = context(config, known, committed, now)
    rows = shared.checkpoint(output(fingerprints, ctx, known))
    return shared.hold(record_tables(rows)), pipeline_counts(rows).toArrow()
