"""The source records a cycle's moved claims newly check: their ids are touched though no new
fingerprint holds them (engine.py), whichever side works the cycle out (Spark or the
driver: small_cycle.py)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.analyze import claims
from spark_jobs.analyze.context import Context


def newly_deadline_checked(frame: DataFrame, old: Context, new: Context) -> DataFrame | None:
    """message_id of the source records in `frame` a deadline pipeline checks under `new`
    but did not under `old`: committed, identified, timestamped between its old and its new
    deadline cutoff (claims.moved_deadlines); None when no cutoff moved."""
    moved = claims.moved_deadlines(old.deadlines, new.deadlines, new.source_topics)
    if not moved:
        return None
    spans = frame.sparkSession.createDataFrame(moved, "topic string, before long, cutoff long")
    ts = F.unix_micros(F.col("timestamp"))
    return (
        frame.where(F.col("committed") & F.col("message_id").isNotNull() & ts.isNotNull())
        .join(F.broadcast(spans), "topic")
        .where((ts >= F.col("before")) & (ts < F.col("cutoff")))
        .select("message_id")
    )


def newly_checked(frame: DataFrame, old: Context, new: Context) -> DataFrame | None:
    """message_id of the source records in `frame` a pipeline checks under `new` but did not
    under `old` (the loss module's rule: committed, identified, timestamped before the
    cutoff, below the claimed offset; for a deadline claim, newly_deadline_checked); None
    when none can be."""
    by_deadline = newly_deadline_checked(frame, old, new)
    by_claim = _newly_claimed(frame, old, new)
    if by_deadline is None or by_claim is None:
        return by_claim if by_deadline is None else by_deadline
    return by_claim.unionByName(by_deadline)


def _newly_claimed(frame: DataFrame, old: Context, new: Context) -> DataFrame | None:
    moved = claims.moved_claims(old.claimed, new.claimed, new.sources, old.cutoff_us, new.cutoff_us)
    if not moved:
        return None
    spans = frame.sparkSession.createDataFrame(
        moved, "topic string, partition int, claimed_before long, claimed long"
    )
    ts = F.unix_micros(F.col("timestamp"))
    checked_now = (ts < new.cutoff_us) & (F.col("offset") < F.col("claimed"))
    not_before = (ts >= old.cutoff_us) | (F.col("offset") >= F.col("claimed_before"))
    return (
        frame.where(F.col("committed") & F.col("message_id").isNotNull() & ts.isNotNull())
        .join(F.broadcast(spans), ["topic", "partition"])
        .where(checked_now & not_before)
        .select("message_id")
    )
