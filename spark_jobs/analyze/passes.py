"""The fingerprint-wide Spark passes of an analysis: the context every partition needs (one
small aggregate: held history and dgm-src routes, from which the loss module's rules work out
the claims), one shuffle of fingerprints
by message id whose partitions work out every id's copies, causes, losses and counts
(per_id), and one shuffle of the records of streams (producer sessions of source topics, a
source partition's copies in a sink partition): the sessions' runs (per_session) and the
records out of order (order).

The engine (engine.py) runs them over every fingerprint on a rebuild and over the
fingerprints of the ids a cycle touches otherwise.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dgm.config.document import DgmConfig
from dgm.contracts.vocabulary import OrderAnomaly
from spark_jobs.analyze import loss, order
from spark_jobs.analyze.output import SCHEMA
from spark_jobs.analyze.per_id import COLUMNS as ID_COLUMNS
from spark_jobs.analyze.per_id import Context, per_id_rows
from spark_jobs.analyze.per_session import COLUMNS as SESSION_COLUMNS
from spark_jobs.analyze.per_session import RUNS, runs_rows
from spark_jobs.schemas import spark_schema

OUTPUT = spark_schema(SCHEMA)
# What the stream pass gives: order.ROWS, and the runs of producer sessions (row RUN; stream
# the session, with per_session.RUNS' start, end and start_ts).
RUN = "run"
STREAM_ROWS = pa.schema([*order.ROWS, *(RUNS.field(n) for n in ("start", "end", "start_ts"))])
STREAM_SPARK = spark_schema(STREAM_ROWS)
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
        sampled=config.topic_one_in(),
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
        fingerprints.select(*(_shipped(c) for c in ID_COLUMNS))
        .repartition(parts, "message_id")
        .mapInArrow(_in_partitions(lambda batch: per_id_rows(batch, ctx)), OUTPUT)
    )


# The list columns of pipeline names go to the Python workers joined into one string
# (id_frame.marked splits them; a pipeline name holds no comma): Arrow-encoding array
# columns into and out of the workers made the per-id stage 7x slower (22 s against 3 s
# for 1M rows through an identity mapInArrow; bench/HISTORY.md, "Sampling: ...").
_JOINED = ("filtered_by", "filter_undecided_by")


def _shipped(column: str) -> Column:
    return F.array_join(column, ",").alias(column) if column in _JOINED else F.col(column)


def stream_records(fingerprints: DataFrame, ctx: Context) -> DataFrame:
    """The records of every stream (STREAM_COLUMNS): the stamped records of source topics,
    committed or aborted (a session's runs count aborted records as present, its order only
    committed ones), streams of their producer session; and the committed records of Kafka
    sink topics made from a source record (dgm-src), streams of that record's partition."""
    stamped = F.col("producer").isNotNull() & F.col("seq").isNotNull()
    common = ["topic", "partition", "offset", "timestamp", "message_id"]
    sources = [t for t in ctx.sources if t not in ctx.sampled]  # Context.sampled: why
    producer = fingerprints.where(F.col("topic").isin(*sources) & stamped).select(
        F.lit(OrderAnomaly.OUT_OF_ORDER.value).alias("anomaly"),
        *common,
        F.col("producer").alias("stream"),
        F.col("seq").alias("position"),
        "committed",
    )
    made = F.col("src_topic").isNotNull() & F.col("src_partition").isNotNull()
    made &= F.col("src_offset").isNotNull() & F.col("committed")
    sinks = [t for t in order.kafka_topics(ctx.sinks) if t not in ctx.sampled]
    sink = fingerprints.where(F.col("topic").isin(*sinks) & made).select(
        F.lit(OrderAnomaly.SINK_OUT_OF_ORDER.value).alias("anomaly"),
        *common,
        F.concat_ws("/", "src_topic", F.col("src_partition").cast("string")).alias("stream"),
        F.col("src_offset").alias("position"),
        "committed",
    )
    return producer.unionByName(sink)


def sessions_of(records: pa.Table) -> pa.Table:
    """The producer sessions' records among stream_records rows (per_session.COLUMNS)."""
    stamped = records.filter(pc.equal(records["anomaly"], OrderAnomaly.OUT_OF_ORDER.value))
    renamed = stamped.select(["topic", "partition", "stream", "position", "timestamp"])
    return renamed.rename_columns(list(SESSION_COLUMNS))


def stream_rows(batch: pa.Table) -> pa.Table:
    """STREAM_ROWS of one partition of stream_records shuffled by stream: its producer
    sessions' runs (per_session), and its records out of order and streams' marks (order)."""
    found = runs_rows(sessions_of(batch))
    judged = order.order_rows(batch.filter(batch["committed"]))
    runs_part = {
        "row": pa.array([RUN] * found.num_rows, pa.string()),
        "stream": found["producer"],
        **{name: found[name] for name in ("topic", "partition", "start", "end", "start_ts")},
    }
    return pa.concat_tables(
        [conform(pa.table(runs_part), STREAM_ROWS), conform(judged, STREAM_ROWS)]
    )


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with `schema`'s columns (nulls for those it lacks)."""
    held = set(table.column_names)
    columns = [
        table[f.name].cast(f.type) if f.name in held else pa.nulls(len(table), f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def split_streams(rows: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(per_session.RUNS, order.ROWS) of STREAM_ROWS."""
    runs = rows.filter(pc.equal(rows["row"], RUN))
    runs = runs.select(["topic", "partition", "stream", "start", "end", "start_ts"])
    runs = runs.rename_columns(list(RUNS.names)).cast(RUNS)
    judged = rows.filter(pc.not_equal(rows["row"], RUN)).select(order.ROWS.names)
    return runs, judged


def streams(fingerprints: DataFrame, ctx: Context, rows: int | None = None) -> DataFrame:
    """The runs of every source producer session, every record out of order and every
    stream's mark (STREAM_ROWS): one shuffle of stream_records by stream (`rows` as in
    by_id). Not the partitions as they lie, though runs merge: the source records may all lie
    in a few of them, and their runs took 2.1 s for 5M rows in one partition, 0.2 s for
    1.2M."""
    shuffled = stream_records(fingerprints, ctx).repartition(
        _partitions(fingerprints, rows), "topic", "partition", "stream"
    )
    return shuffled.mapInArrow(_in_partitions(stream_rows), STREAM_SPARK)


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
