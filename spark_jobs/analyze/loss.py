"""Lost ids and aborted reads of pipelines: the rules, for the engine (per_id, per_session)
to apply, and the group commits they are judged against.

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
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

NOT_IN_SINK, SEQUENCE_GAP = "not in sink", "sequence gap"


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
