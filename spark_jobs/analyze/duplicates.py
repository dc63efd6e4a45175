"""Duplicates, their causes, and producer sequence gaps, from FINGERPRINT rows.

The words are docs/design.md's: a **duplicate** is a committed record whose message id already
appeared at an earlier committed offset in the same topic; the duplicate rate is extra
copies / distinct ids. Across partitions "earlier" means earlier by (timestamp, partition,
offset), which is also how the first copy is chosen. Aborted and unidentified records are
never copies; they are counted on their own.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

# Causes, in precedence order: when several apply to one id, the first one listed names it.
# - aborted read: the id should not be in the sink at all (the source holds it only in
#   aborted transactions), whatever else then copied it;
# - producer retry: the very same send (producer session and dgm-seq) sits at two offsets;
#   a retried send also repeats its dgm-src, so this must win over reprocessing;
# - reprocessing: the same source record (dgm-src) was processed into two sink copies;
# - upstream: only id-level evidence that the source itself held the id twice.
ABORTED_READ, PRODUCER_RETRY, REPROCESSING, UPSTREAM = (
    "aborted read",
    "producer retry",
    "reprocessing",
    "upstream",
)
UNKNOWN = "unknown"  # no header evidence for any cause (e.g. a pipeline stamping nothing)
CAUSES = (ABORTED_READ, PRODUCER_RETRY, REPROCESSING, UPSTREAM)

# Per (topic, message_id): `copies` committed copies, `copy_number` 1 for the first one.
COPY_COLUMNS = (
    "topic",
    "message_id",
    "copies",
    "copy_number",
    "is_extra_copy",
    "partition",
    "offset",
    "timestamp",
    "key",
    "producer",
    "seq",
    "lineage",
    "src_topic",
    "src_partition",
    "src_offset",
)


def _identified(fingerprints: DataFrame) -> DataFrame:
    return fingerprints.where(F.col("committed") & F.col("message_id").isNotNull())


def duplicate_copies(fingerprints: DataFrame) -> DataFrame:
    """Every copy (first and extra) of every id with more than one committed copy in a topic."""
    per_id = Window.partitionBy("topic", "message_id")
    in_order = per_id.orderBy("timestamp", "partition", "offset")
    copies = (
        _identified(fingerprints)
        .withColumn("copies", F.count(F.lit(1)).over(per_id))
        .where(F.col("copies") > 1)
        .withColumn("copy_number", F.row_number().over(in_order))
        .withColumn("is_extra_copy", F.col("copy_number") > 1)
    )
    return copies.select(*COPY_COLUMNS)


def duplicate_summary(fingerprints: DataFrame) -> DataFrame:
    """Per topic: records (committed), distinct_ids, duplicate_copies (extra copies),
    duplicate_rate (extra copies / distinct ids; null without any id), unidentified
    (committed records without an id) and aborted (records of aborted transactions)."""
    committed, identified = F.col("committed"), F.col("message_id").isNotNull()
    counts = fingerprints.groupBy("topic").agg(
        F.count_if(committed).alias("records"),
        F.count_distinct(F.when(committed, F.col("message_id"))).alias("distinct_ids"),
        F.count_if(committed & identified).alias("_identified"),
        F.count_if(committed & ~identified).alias("unidentified"),
        F.count_if(~committed).alias("aborted"),
    )
    extra = (F.col("_identified") - F.col("distinct_ids")).alias("duplicate_copies")
    return counts.select(
        "topic",
        F.col("records").cast("long"),
        F.col("distinct_ids").cast("long"),
        extra.cast("long"),
        # try_divide: null, not an ANSI error, when a topic has no identified record.
        F.try_divide(extra, F.col("distinct_ids")).cast("double").alias("duplicate_rate"),
        F.col("unidentified").cast("long"),
        F.col("aborted").cast("long"),
    )


def duplicate_causes(source_fingerprints: DataFrame, sink_fingerprints: DataFrame) -> DataFrame:
    """Per duplicated id of a pipeline's sink (per sink topic): copies, one flag per cause
    that applies, and `cause`, the first applicable one in CAUSES order (UNKNOWN if none).

    The source is taken as a whole (all its topics): upstream when it holds two or more
    committed copies of the id, aborted read when it holds the id only in aborted records.
    """
    # A value repeats among an id's copies iff it counts more often than it counts distinct
    # (both skip nulls), so one aggregation finds both sink-side causes.
    send = F.when(
        F.col("producer").isNotNull() & F.col("seq").isNotNull(), F.struct("producer", "seq")
    )
    duplicated = (
        _identified(sink_fingerprints)
        .groupBy("topic", "message_id")
        .agg(
            F.count(F.lit(1)).alias("copies"),
            (F.count(send) > F.count_distinct(send)).alias("producer_retry"),
            (F.count("lineage") > F.count_distinct("lineage")).alias("reprocessing"),
        )
        .where(F.col("copies") > 1)
    )
    source = (
        source_fingerprints.where(F.col("message_id").isNotNull())
        .groupBy("message_id")
        .agg(
            F.count_if(F.col("committed")).alias("_committed"),
            F.count_if(~F.col("committed")).alias("_aborted"),
        )
        .select(
            "message_id",
            (F.col("_committed") > 1).alias("upstream"),
            ((F.col("_committed") == 0) & (F.col("_aborted") > 0)).alias("aborted_read"),
        )
    )
    joined = duplicated.join(source, ["message_id"], "left")
    flags = {c: F.coalesce(F.col(c.replace(" ", "_")), F.lit(False)) for c in CAUSES}
    cause: Column = F.lit(UNKNOWN)
    for name in reversed(CAUSES):
        cause = F.when(flags[name], F.lit(name)).otherwise(cause)
    return joined.select(
        "topic",
        "message_id",
        F.col("copies").cast("long"),
        *(flags[c].alias(c.replace(" ", "_")) for c in CAUSES),
        cause.alias("cause"),
    )


def sequence_gaps(fingerprints: DataFrame, first_seq: int | None = 0) -> DataFrame:
    """Runs of dgm-seq missing from the log, per (topic, partition, producer session): lost at
    the producer. Aborted records count as present (their sends reached the broker).

    Each session starts at `first_seq` (the lab's producer starts at 0), so missing leading
    sequences are a gap too; None counts only gaps between two present sequences (for when
    older fingerprints were compacted away). A lost tail cannot be seen from the log alone.
    """
    session = Window.partitionBy("topic", "partition", "producer").orderBy("seq")
    previous = F.lag("seq").over(session)
    if first_seq is not None:
        previous = F.coalesce(previous, F.lit(first_seq - 1).cast("long"))
    stamped = fingerprints.where(F.col("producer").isNotNull() & F.col("seq").isNotNull())
    runs = stamped.select(
        "topic",
        "partition",
        "producer",
        "seq",
        previous.alias("previous"),
    )
    return runs.where(F.col("seq") - F.col("previous") > 1).select(
        "topic",
        "partition",
        "producer",
        (F.col("previous") + 1).alias("first_missing"),
        (F.col("seq") - 1).alias("last_missing"),
        (F.col("seq") - F.col("previous") - 1).alias("missing"),
    )


def keyed_causes(source: DataFrame, sink: DataFrame, key: str) -> DataFrame:
    """duplicate_causes of each value of column `key` (both frames have it) in one call: ids
    are prefixed with the key (keys hold no NUL), so keys never see each other's ids."""
    separator = "\u0000"

    def prefixed(frame: DataFrame) -> DataFrame:
        joined = F.concat_ws(separator, F.col(key), F.col("message_id"))
        return frame.withColumn("message_id", F.when(F.col("message_id").isNotNull(), joined))

    causes = duplicate_causes(prefixed(source).drop(key), prefixed(sink).drop(key))
    start = F.instr(F.col("message_id"), separator) + 1
    return causes.select(
        F.substring_index("message_id", separator, 1).alias(key),
        "topic",
        F.col("message_id").substr(start, F.lit(1 << 30)).alias("message_id"),
        "cause",
    )


def plain_causes(fingerprints: DataFrame, plain: DataFrame) -> DataFrame:
    """Causes of duplicates in topics that are no pipeline's sink: each topic is the sink of
    the topics its records name in dgm-src (none: only sink-side causes can apply)."""
    upstream_of = (
        plain.where(F.col("src_topic").isNotNull())
        .select(F.col("topic").alias("_sink"), F.col("src_topic").alias("topic"))
        .distinct()
    )
    source = fingerprints.join(F.broadcast(upstream_of), ["topic"])
    causes = keyed_causes(source, plain.withColumn("_sink", F.col("topic")), "_sink")
    return causes.select(
        F.lit(None).cast("string").alias("pipeline"), "topic", "message_id", "cause"
    )
