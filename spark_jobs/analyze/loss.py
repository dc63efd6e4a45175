"""Lost ids, late records and aborted reads of pipelines: the per-record rules, as pure
functions per_id applies inside each partition of the fingerprints shuffled by message id.
What they judge against (group commits, external sinks' offsets, the grace and deadline
cutoffs, held_from) are the claims, worked out once per cycle on the driver (claims.py).

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
sink copy exists by then (cause 'not in sink within max_delay'). A checked id delivered later
than that is a **late record** (late.py): never lost, counted. One id is lost or late, never
both: lost needs no copy, late a copy; a copy arriving after the loss was counted makes it late
when its id is worked out again.

**Beyond retention** (docs/design.md): dgm holds a partition's history from its first offset,
or from a later one when older records are gone (claims.held_from). A checked record
missing from the sink but older than its pipeline's newest sink `held_from` may have had its
copy deleted: counted beyond retention, never lost. A session's leading sequences count as a
gap only on a source partition held from its first offset.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from spark_jobs.analyze.output import NO_TIME


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
    pipeline -> its claims.sink_held_from; `deadlines`: (pipeline, deadline_us,
    max_delay_us) of the deadline-claim pipelines, which have no claims (deadline_checked).
    Pipelines, topics and ids are per_id's integer codes."""
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
