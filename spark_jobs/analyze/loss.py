"""Lost ids and aborted reads of pipelines, from FINGERPRINT rows and committed offsets.

The words are docs/design.md's. A source record is **checked** when it is committed, has an id,
sits below the offset the pipeline claims to have processed (the group's committed offset;
for an external sink without group commits, the highest source offset the sink holds + 1)
and is older than the grace cutoff. A checked record's id is **lost** when no committed sink
record of the pipeline carries it (cause 'not in sink'); one row per lost id, at its first
checked source record by (timestamp, topic, partition, offset). A gap in a source producer
session's dgm-seq run is lost too (cause 'sequence gap'), once the record after the gap is
past the cutoff. An **aborted read** is a committed sink record whose id the source holds
only in aborted transactions.

**Beyond retention** (docs/design.md): dgm holds a partition's history from its first offset,
or from a later one when older records are gone (Kafka retention, dgm's retention_h, an audit
that started later); `held_from` is then the timestamp of the oldest record held. A checked
record missing from the sink but older than its pipeline's newest sink `held_from` may have
had its copy deleted: counted beyond retention, never lost. A session's leading sequences
count as a gap only on a source partition held from its first offset.

Every function works on all pipelines at once: source and sink rows carry a `pipeline`
column (FINGERPRINT + pipeline), so a plan's size does not grow with the pipeline count.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_jobs.analyze.duplicates import sequence_gaps

NOT_IN_SINK, SEQUENCE_GAP = "not in sink", "sequence gap"

# The columns of lost(): dgm.published.LOST, plus `window_at`, the time a loss is counted
# at in windows (the source record's timestamp; for a gap, that of the record after it).
LOST_COLUMNS = (
    "pipeline",
    "message_id",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "producer",
    "seq",
    "missing",
    "cause",
    "window_at",
)
# Joins a pipeline name to a value that must stay apart per pipeline (names hold no NUL).
_SEP = "\u0000"


def latest_committed(
    group_offsets: DataFrame, groups: DataFrame, as_of: datetime | None = None
) -> DataFrame:
    """(pipeline, topic, partition, committed_offset): the newest group_offsets sample per
    partition of each pipeline's group, sampled at or before `as_of` when given; `groups`
    holds (pipeline, consumer_group).

    `as_of` is the time the audit read the sinks up to: a commit sampled later may cover sink
    copies the audit has not read yet, and records claimed only then (a backlog a processor
    catches up on after an outage) are older than any grace period."""
    newest = Window.partitionBy("pipeline", "topic", "partition").orderBy(
        F.col("sampled_at").desc()
    )
    sampled = group_offsets.where(F.col("committed_offset").isNotNull())
    if as_of is not None:
        sampled = sampled.where(F.col("sampled_at") <= F.lit(as_of))
    return (
        sampled.join(F.broadcast(groups), F.col("group_id") == F.col("consumer_group"))
        .withColumn("_n", F.row_number().over(newest))
        .where(F.col("_n") == 1)
        .select(
            "pipeline",
            "topic",
            F.col("partition").cast("int"),
            F.col("committed_offset").cast("long"),
        )
    )


def claimed_offsets(committed: DataFrame, external_sink: DataFrame | None = None) -> DataFrame:
    """(pipeline, topic, partition, claimed_offset): below it the pipeline claims to have
    processed the source partition. The group's committed offset; with `external_sink` (the
    sink rows of pipelines writing to a table, which stores its offsets itself and may commit
    to the group only afterwards, for lag) the greater of that and the highest src_offset the
    table holds + 1: the table's own rows are its claim."""
    keys = ["pipeline", "topic", "partition"]
    claimed = committed.select(*keys, F.col("committed_offset").alias("claimed_offset"))
    if external_sink is None:
        return claimed
    held = (
        external_sink.where(F.col("committed") & F.col("src_offset").isNotNull())
        .groupBy(
            "pipeline",
            F.col("src_topic").alias("topic"),
            F.col("src_partition").alias("partition"),
        )
        .agg((F.max("src_offset") + 1).alias("held"))
    )
    return held.join(claimed, keys, "full").select(
        "pipeline",
        "topic",
        F.col("partition").cast("int"),
        # greatest() skips nulls: either side alone is the claim.
        F.greatest("claimed_offset", "held").cast("long").alias("claimed_offset"),
    )


def checked_records(source: DataFrame, claimed: DataFrame, cutoff: datetime) -> DataFrame:
    """Source rows whose fate is known: committed, identified, below the claimed offset of
    their pipeline and partition, and older than `cutoff` (now - grace)."""
    return (
        source.where(F.col("committed") & F.col("message_id").isNotNull())
        .where(F.col("timestamp") < F.lit(cutoff))
        .join(F.broadcast(claimed), ["pipeline", "topic", "partition"])
        .where(F.col("offset") < F.col("claimed_offset"))
        .drop("claimed_offset")
    )


def held_from(fingerprints: DataFrame, *keys: str) -> DataFrame:
    """(*keys, topic, partition, held_from) of each partition whose oldest held record is not
    at offset 0: that record's timestamp. Partitions held from offset 0 have no row."""
    parts = [*keys, "topic", "partition"]
    first = fingerprints.groupBy(*parts).agg(F.min(F.struct("offset", "timestamp")).alias("_f"))
    return first.where(F.col("_f.offset") > 0).select(
        *parts, F.col("_f.timestamp").alias("held_from")
    )


def sink_held_from(sink: DataFrame) -> DataFrame:
    """(pipeline, sink_held_from): the newest held_from of each pipeline's sink topic
    partitions (an external sink is a table dgm reads whole: none)."""
    partitions = held_from(sink.where(~F.col("external")), "pipeline")
    return partitions.groupBy("pipeline").agg(F.max("held_from").alias("sink_held_from"))


def missing(checked: DataFrame, sink: DataFrame) -> DataFrame:
    """Checked rows whose id no committed sink record of the pipeline carries, with
    `beyond_retention`: older than the pipeline's sink_held_from (their copy may be gone)."""
    horizon = sink_held_from(sink)
    return (
        checked.join(_sink_ids(sink), ["pipeline", "message_id"], "left_anti")
        .join(F.broadcast(horizon), ["pipeline"], "left")
        .withColumn(
            "beyond_retention",
            F.coalesce(F.col("timestamp") < F.col("sink_held_from"), F.lit(False)),
        )
        .drop("sink_held_from")
    )


def _sink_ids(sink: DataFrame) -> DataFrame:
    return (
        sink.where(F.col("committed") & F.col("message_id").isNotNull())
        .select("pipeline", "message_id")
        .distinct()
    )


def not_in_sink(missing_rows: DataFrame) -> DataFrame:
    """One row (LOST_COLUMNS) per pipeline and id of `missing_rows` (missing()) that is not
    beyond retention."""
    first = Window.partitionBy("pipeline", "message_id").orderBy(
        F.col("timestamp").asc_nulls_first(), "topic", "partition", "offset"
    )
    return (
        missing_rows.where(~F.col("beyond_retention"))
        .withColumn("_n", F.row_number().over(first))
        .where(F.col("_n") == 1)
        .select(
            *LOST_COLUMNS[: LOST_COLUMNS.index("missing")],
            F.lit(1).cast("long").alias("missing"),
            F.lit(NOT_IN_SINK).alias("cause"),
            F.col("timestamp").alias("window_at"),
        )
    )


def _keyed_producer() -> Column:
    return F.when(
        F.col("producer").isNotNull(), F.concat_ws(_SEP, F.col("pipeline"), F.col("producer"))
    )


def gaps(source: DataFrame, cutoff: datetime) -> DataFrame:
    """Sequence gaps of each pipeline's source producer sessions (LOST_COLUMNS) whose next
    present record is older than `cutoff`: sends lost before they reached Kafka. Sessions
    start at sequence 0; on a partition not held from offset 0 a session's first held
    sequence is its floor (its first records may be gone)."""
    # The pipeline rides in the session name, so a topic two pipelines read counts for both.
    keyed = source.withColumn("producer", _keyed_producer())
    partial = held_from(source).select("topic", "partition")
    found = sequence_gaps(keyed, 0).join(
        F.broadcast(partial).withColumn("first_missing", F.lit(0).cast("long")),
        ["topic", "partition", "first_missing"],
        "left_anti",
    )
    after = (
        keyed.where(F.col("producer").isNotNull() & F.col("seq").isNotNull())
        .groupBy("topic", "partition", "producer", (F.col("seq") - 1).alias("last_missing"))
        .agg(F.min("timestamp").alias("window_at"))
    )
    return (
        found.join(after, ["topic", "partition", "producer", "last_missing"])
        .where(F.col("window_at") < F.lit(cutoff))
        .select(
            F.substring_index("producer", _SEP, 1).alias("pipeline"),
            F.lit(None).cast("string").alias("message_id"),
            "topic",
            "partition",
            F.lit(None).cast("long").alias("offset"),
            F.lit(None).cast("timestamp").alias("timestamp"),
            F.substring_index("producer", _SEP, -1).alias("producer"),
            F.col("first_missing").alias("seq"),
            F.col("missing").cast("long"),
            F.lit(SEQUENCE_GAP).alias("cause"),
            "window_at",
        )
    )


def lost(source: DataFrame, sink: DataFrame, claimed: DataFrame, cutoff: datetime) -> DataFrame:
    """Every lost id (not in sink) and every sequence gap of the sources, LOST_COLUMNS."""
    checked = checked_records(source, claimed, cutoff)
    return not_in_sink(missing(checked, sink)).unionByName(gaps(source, cutoff))


def aborted_reads(source: DataFrame, sink: DataFrame) -> DataFrame:
    """Committed sink rows (all their columns) whose id the pipeline's source holds only in
    aborted transactions."""
    only_aborted = (
        source.where(F.col("message_id").isNotNull())
        .groupBy("pipeline", "message_id")
        .agg(F.max(F.col("committed").cast("int")).alias("_any_committed"))
        .where(F.col("_any_committed") == 0)
        .select("pipeline", "message_id")
    )
    return sink.where(F.col("committed") & F.col("message_id").isNotNull()).join(
        only_aborted, ["pipeline", "message_id"], "left_semi"
    )
