"""The fingerprint-wide Spark shuffles of an analysis, each partition worked on with the
cycle's Context (context.py, made from one small aggregate of its own): one shuffle of
fingerprints by message id whose partitions work out every id's copies, causes, losses and
counts (per_id), and one shuffle of the records of streams (producer sessions of source
topics, a source partition's copies in a sink partition): the sessions' runs (per_session)
and the records out of order (order).

The engine (engine.py) runs them over every fingerprint on a rebuild and over the
fingerprints of the ids a cycle touches otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dgm.contracts.vocabulary import OrderAnomaly
from spark_jobs.analyze import order
from spark_jobs.analyze.context import Context
from spark_jobs.analyze.lineage import with_id_lineage
from spark_jobs.analyze.output import SCHEMA
from spark_jobs.analyze.per_id import COLUMNS as ID_COLUMNS
from spark_jobs.analyze.per_id import per_id_rows
from spark_jobs.analyze.per_session import COLUMNS as SESSION_COLUMNS
from spark_jobs.analyze.per_session import RUNS, runs_rows
from spark_jobs.analyze.shipped import (
    JOINED,
    id_coded,
    id_decoded,
    stream_coded,
    stream_decoded,
    stream_key,
    stream_topics,
)
from spark_jobs.schemas import spark_schema

OUTPUT = spark_schema(SCHEMA)
# What the stream pass gives: order.ROWS, and the runs of producer sessions (row RUN; stream
# the session, with per_session.RUNS' start, end and start_ts).
RUN = "run"
STREAM_ROWS = pa.schema([*order.ROWS, *(RUNS.field(n) for n in ("start", "end", "start_ts"))])
STREAM_SPARK = spark_schema(STREAM_ROWS)
ROWS_PER_TASK = 1_000_000
FEW_ROWS = 100_000


def _in_partitions(
    work: Callable[[pa.Table], pa.Table],
) -> Callable[[Iterable[pa.RecordBatch]], Iterable[pa.RecordBatch]]:
    """`work` on all the rows of a partition at once (an id's rows may span batches)."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        received = list(batches)
        if received:
            yield from work(pa.Table.from_batches(received)).to_batches()

    return run


def by_id(
    fingerprints: DataFrame,
    ctx: Context,
    rows: int | None = None,
    topics: Sequence[str] | None = None,
) -> DataFrame:
    """Every per_id row of the fingerprints (output.SCHEMA): one shuffle by message id.
    `rows`: how many fingerprints there are, when known (more of them, more partitions);
    `topics`: every topic they hold, when known (their records then travel packed,
    shipped.py)."""
    # A fixed count: AQE would coalesce a shuffle by column into one or two partitions (the
    # rows are few bytes each), and the per-partition Python work then runs on one core.
    parts = _partitions(fingerprints, rows)
    if topics is None:
        shipped = fingerprints.select(*(_shipped(c) for c in ID_COLUMNS))
        work = _in_partitions(lambda batch: per_id_rows(batch, ctx))
    else:
        known = list(topics)
        shipped = id_coded(fingerprints, known)
        work = _in_partitions(lambda batch: per_id_rows(id_decoded(batch, known), ctx))
    return shipped.repartition(parts, "message_id").mapInArrow(work, OUTPUT)


def _shipped(column: str) -> Column:
    return F.array_join(column, ",").alias(column) if column in JOINED else F.col(column)


def stream_records(
    fingerprints: DataFrame,
    ctx: Context,
    held: DataFrame | None = None,
    unstamped: Collection[str] | None = None,
) -> DataFrame:
    """The records of every stream (STREAM_COLUMNS): the stamped records of source topics,
    committed or aborted (a session's runs count aborted records as present, its order only
    committed ones), streams of their producer session; and the committed records of Kafka
    sink topics made from a source record (dgm-src, else the id join of lineage.py over
    `held`, default the fingerprints; `unstamped`: its sinks, when known), streams of that
    record's partition."""
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
    linked = with_id_lineage(fingerprints, ctx, held, unstamped)
    sink = linked.where(F.col("topic").isin(*sinks) & made).select(
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


def streams(
    fingerprints: DataFrame,
    ctx: Context,
    rows: int | None = None,
    unstamped: Collection[str] | None = None,
) -> DataFrame:
    """The runs of every source producer session, every record out of order and every
    stream's mark (STREAM_ROWS): one shuffle of stream_records by stream (`rows` as in
    by_id; `unstamped` as there). Not the partitions as they lie, though runs merge: the
    source records may all lie in a few of them, and their runs took 2.1 s for 5M rows in
    one partition, 0.2 s for 1.2M."""
    records = stream_records(fingerprints, ctx, unstamped=unstamped)
    return _judged(records, _partitions(fingerprints, rows), ctx)


def streams_in(
    fingerprints: DataFrame,
    ctx: Context,
    partitions: Collection[tuple[str, int]],
    unstamped: Collection[str] | None = None,
) -> DataFrame:
    """`streams` of the topic `partitions` only (every stream lies in one partition): their
    records, joined by id (lineage.py) against the records holding their ids. What a cycle
    judges again when kept sink records moved between streams (cycle_streams.cycle_relinks)."""
    chosen = fingerprints.sparkSession.createDataFrame(
        sorted(partitions), "topic string, partition int"
    )
    wanted = fingerprints.join(F.broadcast(chosen), ["topic", "partition"], "left_semi")
    ids = wanted.where(F.col("message_id").isNotNull()).select("message_id").distinct()
    held = fingerprints.join(ids, "message_id", "left_semi")
    return _judged(stream_records(wanted, ctx, held, unstamped), _partitions(fingerprints), ctx)


def _judged(records: DataFrame, parts: int, ctx: Context) -> DataFrame:
    """STREAM_ROWS of stream_records `records`: shuffled by stream into `parts` partitions,
    each worked on by stream_rows; packed on the way (shipped.py)."""
    topics = stream_topics(ctx)
    shuffled = stream_coded(records, topics).repartition(parts, stream_key(), "stream")
    return shuffled.mapInArrow(
        _in_partitions(lambda batch: stream_rows(stream_decoded(batch, topics))), STREAM_SPARK
    )


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
