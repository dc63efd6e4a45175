"""The fingerprint-wide Spark passes of an analysis: the context every partition needs (one
small aggregate: held history and dgm-src routes, from which the loss module's rules work out
the claims), one shuffle of fingerprints
by message id whose partitions work out every id's copies, causes, losses and counts
(per_id), and one shuffle of source records by producer session into runs (per_session).

The engine (engine.py) runs them over every fingerprint on a rebuild and over the
fingerprints of the ids a cycle touches otherwise.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dgm.config_schema import DgmConfig
from spark_jobs.analyze import loss
from spark_jobs.analyze.output import SCHEMA
from spark_jobs.analyze.per_id import COLUMNS as ID_COLUMNS
from spark_jobs.analyze.per_id import Context, per_id_rows
from spark_jobs.analyze.per_session import COLUMNS as SESSION_COLUMNS
from spark_jobs.analyze.per_session import RUNS, runs_rows
from spark_jobs.schemas import spark_schema

OUTPUT = spark_schema(SCHEMA)
RUNS_SPARK = spark_schema(RUNS)
_MICROS = 1_000_000
ROWS_PER_TASK = 1_000_000
FEW_ROWS = 100_000


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


@dataclass(frozen=True)
class Routes:
    """What History is made of, for some of the fingerprints: the union of two sets of
    fingerprints has the `merged` Routes of theirs (so a cycle reads only its new rows)."""

    # (topic, partition) -> (offset, timestamp micros or None) of the oldest held record
    first: dict[tuple[str, int], tuple[int, int | None]] = field(default_factory=dict)
    src_offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)
    src_topics: dict[str, frozenset[str]] = field(default_factory=dict)

    def merged(self, other: Routes) -> Routes:
        first = dict(self.first)
        for where, oldest in other.first.items():
            if where not in first or oldest[0] < first[where][0]:
                first[where] = oldest
        src_offsets = dict(self.src_offsets)
        for key, offset in other.src_offsets.items():
            src_offsets[key] = max(offset, src_offsets.get(key, offset))
        src_topics = dict(self.src_topics)
        for topic, named in other.src_topics.items():
            src_topics[topic] = src_topics.get(topic, frozenset()) | named
        return Routes(first, src_offsets, src_topics)

    def history(self) -> History:
        held = loss.held_from(self.first)
        topics = {topic: set(named) for topic, named in self.src_topics.items()}
        return History(held, dict(self.src_offsets), topics)


def routes(fingerprints: DataFrame) -> Routes:
    # min and min_by, not min of a struct: a struct buffer makes Spark sort-aggregate
    # every row (6.6 s against 1.1 s at 10M fingerprints).
    per_route = fingerprints.groupBy("topic", "partition", "src_topic", "src_partition").agg(
        F.min("offset").alias("first_offset"),
        F.min_by("timestamp", "offset").alias("first_timestamp"),
        F.max(F.when(F.col("committed"), F.col("src_offset"))).alias("src_offset"),
    )
    first: dict[tuple[str, int], tuple[int, int | None]] = {}
    src_offsets: dict[tuple[str, str, int], int] = {}
    src_topics: dict[str, set[str]] = defaultdict(set)
    for row in per_route.toArrow().to_pylist():
        where = (row["topic"], row["partition"])
        stamp = row["first_timestamp"]
        oldest = (row["first_offset"], None if stamp is None else _micros(stamp))
        if where not in first or oldest[0] < first[where][0]:
            first[where] = oldest
        if row["src_topic"] is not None:
            src_topics[row["topic"]].add(row["src_topic"])
            if row["src_partition"] is not None and row["src_offset"] is not None:
                src_offsets[(row["topic"], row["src_topic"], row["src_partition"])] = row[
                    "src_offset"
                ]
    return Routes(first, src_offsets, {t: frozenset(us) for t, us in src_topics.items()})


def history(fingerprints: DataFrame) -> History:
    return routes(fingerprints).history()


def context(
    config: DgmConfig, known: History, committed: dict[tuple[str, str, int], int], now: datetime
) -> Context:
    """The Context of a cycle: roles from `config`; claims (loss.claimed_offsets) from the
    group's `committed` offsets (pipeline, topic, partition) and the external sinks' own
    rows; each pipeline's loss.sink_held_from, the grace cutoff (loss.cutoff_us) and the
    deadline-claim pipelines' cutoffs (loss.deadline_cutoffs)."""
    sources: dict[str, list[str]] = defaultdict(list)
    sinks: dict[str, list[str]] = defaultdict(list)
    for p in config.pipelines:
        for topic in p.source_topics:
            sources[topic].append(p.name)
        for topic in p.sink_names():
            sinks[topic].append(p.name)
    sink_names = set(sinks)
    return Context(
        sources={t: tuple(ps) for t, ps in sources.items()},
        sinks={t: tuple(ps) for t, ps in sinks.items()},
        source_topics={p.name: tuple(p.source_topics) for p in config.pipelines},
        plain_sources={
            t: tuple(sorted(us)) for t, us in known.src_topics.items() if t not in sink_names
        },
        claimed=loss.claimed_offsets(config, committed, known.src_offsets),
        sink_held_from=loss.sink_held_from(config, known.held_from),
        cutoff_us=loss.cutoff_us(now, config.analysis.grace_s),
        window_us=config.analysis.window_s * _MICROS,
        deadlines=loss.deadline_cutoffs(config, now),
        expected={p.name: p.expected.strip() for p in config.pipelines},
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


def by_id(fingerprints: DataFrame, ctx: Context, rows: int | None = None) -> DataFrame:
    """Every per_id row of the fingerprints (output.SCHEMA): one shuffle by message id.
    `rows`: how many fingerprints there are, when known (more of them, more partitions)."""
    # A fixed count: AQE would coalesce a shuffle by column into one or two partitions (the
    # rows are few bytes each), and the per-partition Python work then runs on one core.
    parts = _partitions(fingerprints, rows)
    return (
        fingerprints.select(*ID_COLUMNS)
        .repartition(parts, "message_id")
        .mapInArrow(_in_partitions(lambda batch: per_id_rows(batch, ctx)), OUTPUT)
    )


def stamped_sources(fingerprints: DataFrame, ctx: Context) -> DataFrame:
    """The source records of producer sessions (per_session.COLUMNS)."""
    stamped = F.col("producer").isNotNull() & F.col("seq").isNotNull()
    topics = list(ctx.sources)
    return fingerprints.where(F.col("topic").isin(*topics) & stamped).select(*SESSION_COLUMNS)


def session_runs(fingerprints: DataFrame, ctx: Context, rows: int | None = None) -> DataFrame:
    """The runs of every source producer session (per_session.RUNS): one shuffle by session
    (`rows` as in by_id). Not the partitions as they lie, though runs merge: the source
    records may all lie in a few of them, and their runs took 2.1 s for 5M rows in one
    partition, 0.2 s for 1.2M."""
    sessions = stamped_sources(fingerprints, ctx).repartition(
        _partitions(fingerprints, rows), "topic", "partition", "producer"
    )
    return sessions.mapInArrow(_in_partitions(runs_rows), RUNS_SPARK)


def _partitions(frame: DataFrame, rows: int | None = None) -> int:
    """Partitions for a shuffle of `rows` fingerprints (None: not known): the session's
    shuffle partitions, more for more than ~1M rows each (pandas works faster on partitions
    of at most ~1M rows), one for a few (a Python task's fixed cost outweighs their work;
    bench/HISTORY.md, "The rebuild within 3x DuckDB at 10M")."""
    configured = int(frame.sparkSession.conf.get("spark.sql.shuffle.partitions") or 4)
    if rows is None:
        return configured
    if rows < FEW_ROWS:
        return 1
    return max(configured, -(-rows // ROWS_PER_TASK))
