"""Lost ids and aborted reads of one pipeline, from FINGERPRINT rows and committed offsets.

The words are DESIGN.md's. A source record is **checked** when it is committed, has an id,
sits below the offset the pipeline claims to have processed (the group's committed offset;
for an external sink without group commits, the highest source offset the sink holds + 1)
and is older than the grace cutoff. A checked record's id is **lost** when no committed sink
record carries it (cause 'not in sink'); one row per lost id, at its first checked source
record by (timestamp, topic, partition, offset). A gap in a source producer session's dgm-seq
run is lost too (cause 'sequence gap'), once the record after the gap is past the cutoff.
An **aborted read** is a committed sink record whose id the source holds only in aborted
transactions.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from spark_jobs.duplicates import sequence_gaps

NOT_IN_SINK, SEQUENCE_GAP = "not in sink", "sequence gap"

# The columns of lost(): spark_jobs.tables.LOST without `pipeline`, plus `window_at`, the time
# a loss is counted at in windows (the source record's timestamp; for a gap, the timestamp of
# the record after it).
LOST_COLUMNS = (
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


def latest_committed(group_offsets: DataFrame, group_id: str) -> DataFrame:
    """(topic, partition, committed_offset) of `group_id` in its newest group_offsets sample
    per partition."""
    newest = Window.partitionBy("topic", "partition").orderBy(F.col("sampled_at").desc())
    return (
        group_offsets.where(F.col("group_id") == F.lit(group_id))
        .where(F.col("committed_offset").isNotNull())
        .withColumn("_n", F.row_number().over(newest))
        .where(F.col("_n") == 1)
        .select("topic", F.col("partition").cast("int"), F.col("committed_offset").cast("long"))
    )


def claimed_offsets(committed: DataFrame, external_sink: DataFrame | None = None) -> DataFrame:
    """(topic, partition, claimed_offset): below it the pipeline claims to have processed the
    source partition. The group's committed offset; with `external_sink` (the fingerprints of
    an external sink table, which may store its offsets itself) the highest src_offset it
    holds + 1 for the partitions the group has no commit for."""
    claimed = committed.select(
        "topic", "partition", F.col("committed_offset").alias("claimed_offset")
    )
    if external_sink is None:
        return claimed
    held = (
        external_sink.where(F.col("committed") & F.col("src_offset").isNotNull())
        .groupBy(F.col("src_topic").alias("topic"), F.col("src_partition").alias("partition"))
        .agg((F.max("src_offset") + 1).alias("held"))
    )
    return held.join(claimed, ["topic", "partition"], "full").select(
        "topic",
        F.col("partition").cast("int"),
        F.coalesce("claimed_offset", "held").cast("long").alias("claimed_offset"),
    )


def checked_records(source: DataFrame, claimed: DataFrame, cutoff: datetime) -> DataFrame:
    """Source fingerprints whose fate is known: committed, identified, below the claimed
    offset of their partition and older than `cutoff` (now - grace)."""
    return (
        source.where(F.col("committed") & F.col("message_id").isNotNull())
        .where(F.col("timestamp") < F.lit(cutoff))
        .join(F.broadcast(claimed), ["topic", "partition"])
        .where(F.col("offset") < F.col("claimed_offset"))
        .drop("claimed_offset")
    )


def _sink_ids(sink: DataFrame) -> DataFrame:
    return (
        sink.where(F.col("committed") & F.col("message_id").isNotNull())
        .select("message_id")
        .distinct()
    )


def not_in_sink(checked: DataFrame, sink: DataFrame) -> DataFrame:
    """One row (LOST_COLUMNS) per id of `checked` that no committed sink record carries."""
    first = Window.partitionBy("message_id").orderBy(
        F.col("timestamp").asc_nulls_first(), "topic", "partition", "offset"
    )
    missing = checked.join(_sink_ids(sink), ["message_id"], "left_anti")
    return (
        missing.withColumn("_n", F.row_number().over(first))
        .where(F.col("_n") == 1)
        .select(
            "message_id",
            "topic",
            "partition",
            "offset",
            "timestamp",
            "producer",
            "seq",
            F.lit(1).cast("long").alias("missing"),
            F.lit(NOT_IN_SINK).alias("cause"),
            F.col("timestamp").alias("window_at"),
        )
    )


def gaps(source: DataFrame, cutoff: datetime, first_seq: int | None = 0) -> DataFrame:
    """Sequence gaps of the source's producer sessions (LOST_COLUMNS) whose next present
    record is older than `cutoff`: a send lost before it reached Kafka."""
    found = sequence_gaps(source, first_seq)
    after = (
        source.where(F.col("producer").isNotNull() & F.col("seq").isNotNull())
        .groupBy("topic", "partition", "producer", F.col("seq").alias("_next"))
        .agg(F.min("timestamp").alias("window_at"))
    )
    joined = found.join(
        after,
        (found["topic"] == after["topic"])
        & (found["partition"] == after["partition"])
        & (found["producer"] == after["producer"])
        & (found["last_missing"] + 1 == after["_next"]),
    ).where(after["window_at"] < F.lit(cutoff))
    return joined.select(
        F.lit(None).cast("string").alias("message_id"),
        found["topic"],
        found["partition"],
        F.lit(None).cast("long").alias("offset"),
        F.lit(None).cast("timestamp").alias("timestamp"),
        found["producer"],
        found["first_missing"].alias("seq"),
        found["missing"].cast("long").alias("missing"),
        F.lit(SEQUENCE_GAP).alias("cause"),
        after["window_at"],
    )


def lost(
    source: DataFrame,
    sink: DataFrame,
    claimed: DataFrame,
    cutoff: datetime,
    first_seq: int | None = 0,
) -> DataFrame:
    """Every lost id (not in sink) and every sequence gap of the source, LOST_COLUMNS."""
    checked = checked_records(source, claimed, cutoff)
    return not_in_sink(checked, sink).unionByName(gaps(source, cutoff, first_seq))


def aborted_reads(source: DataFrame, sink: DataFrame) -> DataFrame:
    """Committed sink records (all their columns) whose id the source holds only in aborted
    transactions."""
    only_aborted = (
        source.where(F.col("message_id").isNotNull())
        .groupBy("message_id")
        .agg(F.max(F.col("committed").cast("int")).alias("_any_committed"))
        .where(F.col("_any_committed") == 0)
        .select("message_id")
    )
    return sink.where(F.col("committed") & F.col("message_id").isNotNull()).join(
        only_aborted, ["message_id"], "left_semi"
    )
