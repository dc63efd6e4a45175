"""Fingerprints marked committed or aborted: `committed` false for the records only a
read_uncommitted consumer sees (an aborted transaction's).

Two ways to tell them: the read_uncommitted view of an offset range against the
read_committed view of the same range (`aborted_offsets`, then `mark_aborted`), or the
aborted batches' spans the transaction markers tell (aborted_batches.py; `mark_aborted_spans`).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dgm.contracts.fingerprints import COORDINATES
from spark_jobs.schemas import FINGERPRINT


def aborted_offsets(uncommitted_view: DataFrame, committed_view: DataFrame) -> DataFrame:
    """The coordinates (topic, partition, offset) of `uncommitted_view` (a read_uncommitted
    read's rows) that `committed_view` (a read_committed read of the same ranges, any columns
    with the coordinates) does not hold: the aborted records. An anti join of the coordinates
    alone, so only those are shuffled, and each record is kept once however the committed
    view repeats it."""
    coordinates = list(COORDINATES)
    return uncommitted_view.select(*coordinates).join(
        committed_view.select(*coordinates), coordinates, "left_anti"
    )


def mark_aborted(uncommitted_view: DataFrame, aborted: DataFrame, broadcast: bool) -> DataFrame:
    """`uncommitted_view` (fingerprints) with `committed` false for the records `aborted`
    (aborted_offsets, each once) names and true for the others. `broadcast`: `aborted` is
    small enough to send whole to every task, so the fingerprints are not shuffled."""
    flagged = aborted.select(*COORDINATES).withColumn("_aborted", F.lit(True))
    marked = uncommitted_view.drop("committed").join(
        F.broadcast(flagged) if broadcast else flagged, list(COORDINATES), "left"
    )
    committed = F.col("_aborted").isNull().alias("committed")
    return marked.select(
        *(committed if f.name == "committed" else f.name for f in FINGERPRINT.fields)
    )


def mark_committed(uncommitted_view: DataFrame, committed_view: DataFrame) -> DataFrame:
    """`uncommitted_view` (fingerprints of a read_uncommitted read) with `committed` set: true
    iff the record's (topic, partition, offset) is in `committed_view`, a read_committed read
    of the same range. One plan, no broadcast: the audit materializes the aborted offsets
    first to choose (chunked_read.fingerprinted)."""
    return mark_aborted(
        uncommitted_view, aborted_offsets(uncommitted_view, committed_view), broadcast=False
    )


# Offsets per bucket of the range join in mark_aborted_spans: a span is listed once per bucket
# it covers, a record looks up its own bucket only.
SPAN_BUCKET = 4096


def mark_aborted_spans(uncommitted_view: DataFrame, spans: DataFrame) -> DataFrame:
    """`uncommitted_view` (fingerprints) with `committed` false for the records inside
    `spans` (topic, partition, first, last: aborted batches' offsets, inclusive, never
    overlapping; spark_jobs/audit/aborted_batches.py) and unchanged for the others. The spans
    are few (a batch each) and sent whole to every task: a hash join on (topic, partition,
    offset bucket), then the offset tested against the span; at most one span holds it."""
    bucket = F.floor(F.col("offset") / SPAN_BUCKET)
    listed = spans.select(
        F.col("topic").alias("_topic"),
        F.col("partition").alias("_partition"),
        F.explode(
            F.sequence(F.floor(F.col("first") / SPAN_BUCKET), F.floor(F.col("last") / SPAN_BUCKET))
        ).alias("_span_bucket"),
        F.col("first").alias("_first"),
        F.col("last").alias("_last"),
    )
    marked = uncommitted_view.withColumn("_bucket", bucket).join(
        F.broadcast(listed),
        (F.col("topic") == F.col("_topic"))
        & (F.col("partition") == F.col("_partition"))
        & (F.col("_bucket") == F.col("_span_bucket"))
        & F.col("offset").between(F.col("_first"), F.col("_last")),
        "left",
    )
    committed = (F.col("committed") & F.col("_first").isNull()).alias("committed")
    return marked.select(
        *(committed if f.name == "committed" else f.name for f in FINGERPRINT.fields)
    )
