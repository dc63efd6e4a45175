"""What says a source record should already be in a pipeline's sink (docs/design.md, "claim"):
the driver-side claims, worked out once per cycle and shipped to every partition in the
Context (context.context), where loss.py's rules judge each record against them.

Under **group commits** a pipeline claims the offsets below its consumer group's committed
offset (latest_committed: the newest sample, taken no later than the audit read the sinks);
an external sink's **sink offsets** claim the highest source offset the sink holds + 1, the
greater of the two when both exist (claimed_offsets). A **deadline** claim has no offset:
its records are claimed once older than now - max_delay (deadline_cutoffs). Records younger
than the grace cutoff (cutoff_us) are pending under the other claims.

**Held from** (docs/design.md): dgm holds a partition's history from its first offset, or
from a later one when older records are gone (Kafka retention, dgm's retention_h, an audit
that started later); `held_from` is then the timestamp of the oldest record held, and a
pipeline's sink_held_from the newest of its sink partitions', the horizon past which a
missing copy may have been deleted (loss.lost: beyond retention).

Between cycles the engine follows the claims and deadlines that moved (moved_claims,
moved_deadlines) to find the records a pipeline checks now and did not before.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc

from dgm.config.document import DgmConfig
from spark_jobs.analyze.output import NO_TIME

_MICROS = 1_000_000

# (pipeline, topic, partition) -> offset: a group's committed offset, or a claimed one.
Committed = dict[tuple[str, str, int], int]
Claims = Mapping[tuple[str, str, int], int]


def latest_committed(
    group_offsets: pa.Table,
    config: DgmConfig,
    as_of: datetime | None = None,
    sinks_read_to: Mapping[str, datetime | None] | None = None,
) -> Committed:
    """(pipeline, topic, partition) -> committed offset: the newest group_offsets sample per
    partition of each pipeline's group, sampled at or before `as_of` when given, and at or
    before the pipeline's `sinks_read_to` (sinks_read_to's; None: no commit) when earlier.

    `as_of` is the time the audit read the sinks up to: a commit sampled later may cover sink
    copies the audit has not read yet, and records claimed only then (a backlog a processor
    catches up on after an outage) are older than any grace period. The same holds per
    pipeline: its sinks may be read to an earlier time, or not at all this cycle (a sink
    partition missing from the newest samples, its leader away)."""
    sampled = group_offsets.select(["sampled_at", "group_id", "topic", "partition",
                                    "committed_offset"])  # fmt: skip
    pipelines: dict[str, list[str]] = {}
    for p in config.pipelines:
        if p.deadline() is None:  # a deadline claim's group (if any) claims nothing
            pipelines.setdefault(p.consumer_group, []).append(p.name)
    sampled = sampled.filter(
        pc.and_(
            pc.is_valid(sampled["committed_offset"]),
            pc.is_in(sampled["group_id"], pa.array(list(pipelines), pa.string())),
        )
    )
    if as_of is not None:
        sampled = sampled.filter(pc.less_equal(sampled["sampled_at"], pa.scalar(as_of)))
    # The newest sample of each (pipeline, topic, partition) by its pipeline's time: sorted
    # oldest first, the last wins.
    read_to = sinks_read_to or {}
    newest: Committed = {}
    ordered = sampled.sort_by([("sampled_at", "ascending")])
    columns = ("sampled_at", "group_id", "topic", "partition", "committed_offset")
    for at, group, topic, partition, offset in zip(
        *(ordered[c].to_pylist() for c in columns), strict=True
    ):
        for pipeline in pipelines.get(group, ()):
            limit = read_to.get(pipeline, at)
            if limit is not None and at <= limit:  # else sampled after its sinks were read
                newest[(pipeline, topic, partition)] = offset
    return newest


def sinks_read_to(
    config: DgmConfig, last_sampled: Mapping[tuple[str, int], datetime | None]
) -> dict[str, datetime | None]:
    """pipeline -> the time the audit holds all its Kafka sink partitions up to: the oldest
    of their `last_sampled` (AuditResult's), None when one was not read this cycle."""
    found: dict[str, datetime | None] = {}
    for p in config.pipelines:
        times = [t for (topic, _), t in last_sampled.items() if topic in p.sink_topics]
        if times:
            found[p.name] = None if None in times else min(t for t in times if t is not None)
    return found


def unread(read_to: Mapping[str, datetime | None]) -> set[str]:
    """The pipelines of `read_to` (sinks_read_to's) with a sink partition not read this
    cycle: none of their commits count, so held_claims keeps their last cycle's. (Others'
    claims never move back for it: their sinks' read time only moves on.)"""
    return {p for p, t in read_to.items() if t is None}


def held_lines(
    read_to: Mapping[str, datetime | None],
    last_sampled: Mapping[tuple[str, int], datetime | None],
    config: DgmConfig,
) -> list[str]:
    """A progress line per `unread` pipeline: the sink partitions that hold its claims."""
    lines = []
    for pipeline in sorted(unread(read_to)):
        sinks = next(p.sink_topics for p in config.pipelines if p.name == pipeline)
        late = sorted(
            f"{topic}/{partition}"
            for (topic, partition), t in last_sampled.items()
            if topic in sinks and t is None
        )
        lines.append(
            f"analyze: pipeline {pipeline}: sink partitions {', '.join(late)} missing from the "
            "newest offsets samples (leader away?): its commits since count once they are read"
        )
    return lines


def held_claims(committed: Claims, before: Claims, held: Collection[str]) -> Committed:
    """`committed` with the `held` pipelines' claims kept at least where the last cycle had
    them (`before`): a claim made while the sink was read is no less true when a partition's
    leader is away now, and a claim moving back would rebuild every table (a group's reset
    still does: only the held pipelines keep theirs)."""
    kept = dict(committed)
    for key, offset in before.items():
        if key[0] in held:
            kept[key] = max(offset, kept.get(key, offset))
    return kept


def claimed_offsets(
    config: DgmConfig, committed: Claims, src_offsets: Mapping[tuple[str, str, int], int]
) -> Committed:
    """(pipeline, topic, partition) -> the offset below which the pipeline claims to have
    processed the source partition: the group's `committed` offset, and for an external sink
    the highest source offset its rows hold + 1 (`src_offsets`: (sink topic, source topic,
    source partition) -> highest committed dgm-src offset), the greater of the two."""
    deadline = {p.name for p in config.pipelines if p.deadline() is not None}
    claimed = {key: offset for key, offset in committed.items() if key[0] not in deadline}
    for p in config.pipelines:
        if p.external_sink is None or p.name in deadline:
            continue
        external = p.sink_names()[-1]
        for (sink, src, part), offset in src_offsets.items():
            if sink == external:
                key = (p.name, src, part)
                claimed[key] = max(claimed.get(key, offset + 1), offset + 1)
    return claimed


def held_from(
    first: Mapping[tuple[str, int], tuple[int, int | None]],
) -> dict[tuple[str, int], int | None]:
    """(topic, partition) -> `held_from`, the timestamp (micros, None when unknown) of the
    oldest record held, for the partitions not held from offset 0; `first`: (topic,
    partition) -> (offset, timestamp) of the oldest record held."""
    return {where: stamp for where, (offset, stamp) in first.items() if offset > 0}


def sampled_held_from(
    held: Mapping[tuple[str, int], int | None],
    audited_from: Mapping[tuple[str, int], int],
    sampled: Collection[str],
) -> dict[tuple[str, int], int | None]:
    """`held` (held_from's) with a sampled topic's partitions whose audits started at offset 0
    held from their first offset: their oldest kept fingerprint lies past offset 0 only
    because the ids before it were not kept (docs/design.md, "Sampled pipelines")."""
    return {
        where: stamp
        for where, stamp in held.items()
        if not (where[0] in sampled and audited_from.get(where) == 0)
    }


def sink_held_from(config: DgmConfig, held: Mapping[tuple[str, int], int | None]) -> dict[str, int]:
    """pipeline -> the newest `held_from` (micros) of its sink partitions (`held_from`'s);
    a pipeline whose sinks are all held from their first offset has none. An external
    sink's snapshot is whole: it has none either."""
    found: dict[str, int] = {}
    for p in config.pipelines:
        external = p.sink_names()[-1] if p.external_sink is not None else None
        for topic in p.sink_names():
            if topic == external:
                continue
            stamps = [s for (t, _), s in held.items() if t == topic and s is not None]
            if p.name in found:
                stamps.append(found[p.name])
            if stamps:
                found[p.name] = max(stamps)
    return found


def cutoff_us(now: datetime, grace_s: float) -> int:
    """The grace cutoff (micros): records at or after it are pending, not judged yet."""
    return round((now - timedelta(seconds=grace_s)).timestamp() * _MICROS)


def deadline_cutoffs(config: DgmConfig, now: datetime) -> dict[str, tuple[int, int]]:
    """pipeline -> (deadline cutoff, max_delay), both micros, of each deadline-claim pipeline:
    its records timestamped before the cutoff (now - max_delay) are checked."""
    found = {}
    for p in config.pipelines:
        delay = p.deadline()
        if delay is not None:
            micros = round(delay.total_seconds() * _MICROS)
            found[p.name] = (round(now.timestamp() * _MICROS) - micros, micros)
    return found


def moved_deadlines(
    old: Mapping[str, tuple[int, int]],
    new: Mapping[str, tuple[int, int]],
    source_topics: Mapping[str, tuple[str, ...]],
) -> list[tuple[str, int, int]]:
    """(topic, cutoff before, cutoff now) of the source topics of deadline pipelines whose
    cutoff moved on: their records timestamped in [before, now) are checked now, not before.
    A pipeline new to the deadline claim counts from the start of time."""
    moved = []
    for pipeline, (cutoff, _) in new.items():
        before = old.get(pipeline, (NO_TIME, 0))[0]
        if before != cutoff:
            moved += [(topic, before, cutoff) for topic in source_topics.get(pipeline, ())]
    return moved


def moved_claims(
    old: Claims,
    new: Claims,
    sources: Mapping[str, tuple[str, ...]],
    old_cutoff_us: int,
    new_cutoff_us: int,
) -> list[tuple[str, int, int, int]]:
    """(topic, partition, claimed before, claimed now) of the source partitions of a
    pipeline (`sources`: topic -> pipelines reading it) whose checked records may be more
    under the `new` claims and cutoff than under the `old` ones."""
    moved = []
    for (pipeline, topic, partition), offset in new.items():
        if pipeline not in sources.get(topic, ()):
            continue
        before = old.get((pipeline, topic, partition), 0)
        if before != offset or old_cutoff_us != new_cutoff_us:
            moved.append((topic, partition, before, offset))
    return moved
