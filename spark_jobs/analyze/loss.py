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

import pyarrow as pa
import pyarrow.compute as pc

from dgm.config_schema import DgmConfig

NOT_IN_SINK, SEQUENCE_GAP = "not in sink", "sequence gap"


Committed = dict[tuple[str, str, int], int]


def latest_committed(
    group_offsets: pa.Table, config: DgmConfig, as_of: datetime | None = None
) -> Committed:
    """(pipeline, topic, partition) -> committed offset: the newest group_offsets sample per
    partition of each pipeline's group, sampled at or before `as_of` when given.

    `as_of` is the time the audit read the sinks up to: a commit sampled later may cover sink
    copies the audit has not read yet, and records claimed only then (a backlog a processor
    catches up on after an outage) are older than any grace period."""
    sampled = group_offsets.select(["sampled_at", "group_id", "topic", "partition",
                                    "committed_offset"])  # fmt: skip
    pipelines: dict[str, list[str]] = {}
    for p in config.pipelines:
        pipelines.setdefault(p.consumer_group, []).append(p.name)
    sampled = sampled.filter(
        pc.and_(
            pc.is_valid(sampled["committed_offset"]),
            pc.is_in(sampled["group_id"], pa.array(list(pipelines), pa.string())),
        )
    )
    if as_of is not None:
        sampled = sampled.filter(pc.less_equal(sampled["sampled_at"], pa.scalar(as_of)))
    # The newest sample of each (group, topic, partition): sorted oldest first, the last wins.
    newest: dict[tuple[str, str, int], int] = {}
    ordered = sampled.sort_by([("sampled_at", "ascending")])
    for group, topic, partition, offset in zip(
        *(ordered[c].to_pylist() for c in ("group_id", "topic", "partition", "committed_offset")),
        strict=True,
    ):
        newest[(group, topic, partition)] = offset
    return {
        (pipeline, topic, partition): offset
        for (group, topic, partition), offset in newest.items()
        for pipeline in pipelines.get(group, ())
    }
