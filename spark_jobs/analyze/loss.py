"""Lost ids and aborted reads of pipelines: the rules, as pure functions, and the claims they
are judged against (group commits, external sinks' offsets, the grace cutoff, held_from).
per_id applies `lost` and `aborted_reads` inside each partition of the fingerprints shuffled
by message id; passes.context works the claims out once per cycle for every partition.

The words are docs/design.md's. A source record is **checked** when it is committed, has an id,
sits below the offset the pipeline claims to have processed (the group's committed offset;
for an external sink without group commits, the highest source offset the sink holds + 1)
and is older than the grace cutoff. A checked record's id is **lost** when no committed sink
record of the pipeline carries it (cause 'not in sink'); one row per lost id, at its first
checked source record by (timestamp, topic, partition, offset); cause 'torn commit' instead
when the sink holds the id in aborted transactions (first_aborted_copies; not under a
deadline claim). A gap in a source producer session's dgm-seq run is lost too (cause
'sequence gap'), once the record after the gap is past the cutoff (per_session.gaps). An
**aborted read** is a committed sink record whose id the source holds only in aborted
transactions.

A pipeline with a **deadline** claim (claim = "deadline") has no claimed offset: its source
record is checked once it is committed, identified and timestamped before now - max_delay (the
deadline cutoff, per pipeline; the grace cutoff does not apply), and its id is lost when no
sink copy exists by then (cause 'not in sink within max_delay'). A checked id whose first sink
copy (by timestamp) is later than its first checked source record + max_delay is a **late
record**: never lost, counted. One id is lost or late, never both: lost needs no copy, late a
copy; a copy arriving after the loss was counted makes it late when its id is worked out again.

**Beyond retention** (docs/design.md): dgm holds a partition's history from its first offset,
or from a later one when older records are gone (Kafka retention, dgm's retention_h, an audit
that started later); `held_from` is then the timestamp of the oldest record held. A checked
record missing from the sink but older than its pipeline's newest sink `held_from` may have
had its copy deleted: counted beyond retention, never lost. A session's leading sequences
count as a gap only on a source partition held from its first offset.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime, timedelta

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from dgm.config.document import DgmConfig
from spark_jobs.analyze.output import NO_TIME

_MICROS = 1_000_000

# (pipeline, topic, partition) -> offset: a group's committed offset, or a claimed one.
Committed = dict[tuple[str, str, int], int]
Claims = Mapping[tuple[str, str, int], int]


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


def _pairs(rows: pd.DataFrame) -> pd.Index:
    """(pipeline, message_id) codes (both >= 0) as one integer, to match pairs fast."""
    return pd.Index(rows["pipeline"].to_numpy(dtype="int64") * 2**32 + rows["message_id"])


def deadline_checked(source: pd.DataFrame, deadlines: pd.DataFrame) -> pd.DataFrame:
    """The committed, timed `source` rows of deadline pipelines timestamped before their
    cutoff; `deadlines`: (pipeline, deadline_us, max_delay_us)."""
    timed = source[source["has_ts"]].merge(deadlines, on="pipeline")
    return timed[timed["ts"] < timed["deadline_us"]]


def lost(
    sources: pd.DataFrame,
    sinks: pd.DataFrame,
    claims: pd.DataFrame,
    cutoff: int,
    held: Mapping[int, int],
    deadlines: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(checked, lost): checked source rows per pipeline with `is_beyond` (missing from the
    sink, beyond retention) and `counted` (missing, not beyond retention); lost rows, one
    per pipeline and id at its first checked source record. `sources`: identified source
    rows per pipeline; `sinks`: committed sink rows per pipeline; `claims`: (pipeline,
    topic, partition, claimed_offset); `cutoff`: the grace cutoff (micros); `held`:
    pipeline -> its sink_held_from; `deadlines`: (pipeline, deadline_us, max_delay_us) of
    the deadline-claim pipelines, which have no claims (deadline_checked). Pipelines, topics
    and ids are per_id's integer codes."""
    source = sources[sources["committed"]]
    timely = source[source["has_ts"] & (source["ts"] < cutoff)]
    checked = timely.merge(claims, on=["pipeline", "topic", "partition"])
    checked = checked[checked["offset"] < checked["claimed_offset"]]
    if deadlines is not None and not deadlines.empty:
        by_deadline = deadline_checked(source, deadlines)
        if checked.empty or by_deadline.empty:  # no all-NA columns to concat
            checked = by_deadline if checked.empty else checked
        else:
            checked = pd.concat([checked, by_deadline], ignore_index=True)
    missing = ~_pairs(checked).isin(_pairs(sinks[sinks["has_id"]]))
    horizon = checked["pipeline"].map(held).astype("float64")
    beyond = missing & horizon.notna() & (checked["ts"] < horizon.fillna(NO_TIME))
    checked = checked.assign(is_beyond=beyond, counted=missing & ~beyond)
    first = (
        checked[checked["counted"]]
        .sort_values(["pipeline", "message_id", "ts", "topic", "partition", "offset"])
        .drop_duplicates(["pipeline", "message_id"])
    )
    return checked, first


def late(checked: pd.DataFrame, sinks: pd.DataFrame, deadlines: pd.DataFrame) -> pd.DataFrame:
    """Late records: per deadline pipeline and checked id with a sink copy, its first checked
    source row when the id's first committed sink copy (by timestamp) is later than that
    row's timestamp + max_delay. `checked` as lost() gives it; untimed copies never count."""
    found = checked[~checked["counted"] & ~checked["is_beyond"]]
    found = found[found["pipeline"].isin(deadlines["pipeline"])]
    first = found.sort_values(
        ["pipeline", "message_id", "ts", "topic", "partition", "offset"]
    ).drop_duplicates(["pipeline", "message_id"])
    copies = sinks[sinks["has_id"] & sinks["has_ts"]]
    arrived = copies.groupby(["pipeline", "message_id"])["ts"].min().rename("first_copy_us")
    first = first.merge(arrived.reset_index(), on=["pipeline", "message_id"])
    delay = first["pipeline"].map(deadlines.set_index("pipeline")["max_delay_us"])
    return first[first["first_copy_us"] > first["ts"] + delay]


def first_aborted_copies(aborted: pd.DataFrame) -> pd.DataFrame:
    """(pipeline, message_id, topic, partition, offset) of the first aborted sink record of
    each id by (topic, partition, offset); `aborted`: identified aborted sink rows per
    pipeline. A lost id of a group or sink-offset claim with one is a **torn commit**
    (docs/design.md): it has no committed sink copy (it is lost), so the aborted ones are all
    the sink holds, while the claim covers its source record (it was checked)."""
    keys = ["pipeline", "message_id"]
    ordered = aborted.sort_values([*keys, "topic", "partition", "offset"])
    return ordered.drop_duplicates(keys)[[*keys, "topic", "partition", "offset"]]


def aborted_reads(sources: pd.DataFrame, sinks: pd.DataFrame) -> pd.DataFrame:
    """Committed sink rows (per pipeline) of ids the pipeline's source holds only aborted."""
    any_committed = sources["committed"].groupby(_pairs(sources)).any()
    only_aborted = any_committed.index[~any_committed.to_numpy()]
    identified = sinks[sinks["has_id"]]
    return identified[_pairs(identified).isin(only_aborted)]
