"""The analysis engine (class `Engine`): it keeps its state and recomputes only what a cycle's
new records touch, with the Spark passes of passes.py.

Kept between cycles: the fingerprints in the executors (audit.incremental_load, which says
what is new), and on the driver what is bounded by keys and windows, not by records — the
per-key counts (counts.py), the duplicate and lost rows, the producer sessions' runs
(per_session.py), the records out of order and the marks of their streams (order.py), the
routes History is made of and the Context the counts were made under (context.py).
All of it is derived: a new process, a failed cycle or anything this module cannot follow
(`rebuild_reason`) makes the next cycle rebuild it from the fingerprints, every table in one
pass. Nothing lives only in the driver that executors need: they get the Context with each
task, as in a rebuild.

A cycle's touched ids are those of its new (or changed external) fingerprints and those of
source records a pipeline now checks that it did not (its claimed offset or the grace cutoff
moved past them). Each id's rows depend on that id's fingerprints alone (per_id.py), so the
touched ids' rows are worked out as they were (old fingerprints, old Context) and as they are;
the counts change by the difference, their duplicate and lost rows are replaced.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from datetime import datetime
from functools import reduce

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dgm.config.document import DgmConfig
from dgm.contracts import published as tables
from spark_jobs.analysis_input import Fingerprints
from spark_jobs.analyze import claims, order
from spark_jobs.analyze import counts as tally
from spark_jobs.analyze import small_cycle as small
from spark_jobs.analyze.checked import newly_checked
from spark_jobs.analyze.context import Context, History, Routes, context, routes, routes_in
from spark_jobs.analyze.cycle_streams import cycle_relinks, cycle_rows, cycle_stream_records
from spark_jobs.analyze.lineage import unstamped_among, unstamped_sinks
from spark_jobs.analyze.passes import (
    by_id,
    sessions_of,
    split_streams,
    streams,
    streams_in,
)
from spark_jobs.analyze.per_session import COLUMNS as SESSION_COLUMNS
from spark_jobs.analyze.per_session import gap_rows, intervals_of, runs, runs_frame
from spark_jobs.analyze.record_counts import partition_records
from spark_jobs.analyze.steps import Beside, Timings, timed

log = logging.getLogger("dgm.analyze")


@dataclass(frozen=True)
class State:
    ctx: Context
    kept_routes: Routes
    known: History
    records: pa.Table  # output.SCHEMA rows of RECORD_KINDS
    counts: pd.DataFrame  # counts.summed
    runs: pd.DataFrame  # per_session.RUNS
    behind: pd.DataFrame  # the records out of order (order.judge's)
    marks: pd.DataFrame  # every order stream's mark (order.judge's)
    # The sink topics whose records the id join places (lineage.unstamped_sinks)
    unstamped: frozenset[str] = frozenset()


def _union(first: DataFrame, second: DataFrame | None) -> DataFrame:
    return first if second is None else first.unionByName(second)


def rebuild_reason(
    state: State | None, fingerprints: Fingerprints, known: History, ctx: Context
) -> str:
    """Why the kept state cannot be brought up to date by difference ('' when it can)."""
    if state is None:
        return "no state"
    if not fingerprints.changed:
        return "fingerprints read again"
    old = state.ctx
    shape = ("sources", "sinks", "source_topics", "plain_sources", "window_us")
    if any(getattr(old, name) != getattr(ctx, name) for name in shape):
        return "pipelines or windows changed"
    if old.sampled != ctx.sampled:
        return "id samples changed"
    if old.expected != ctx.expected:
        return "a pipeline's expected records changed"
    if old.objectives != ctx.objectives:
        return "a pipeline's latency objective changed"
    if old.sink_held_from != ctx.sink_held_from or state.known.held_from != known.held_from:
        return "oldest held records changed"
    if ctx.cutoff_us < old.cutoff_us:
        return "grace cutoff moved back"
    if deadline_reason(old, ctx):
        return deadline_reason(old, ctx)
    if any(ctx.claimed.get(key, -1) < offset for key, offset in old.claimed.items()):
        return "claimed offsets moved back"
    return ""


def deadline_reason(old: Context, new: Context) -> str:
    """Why deadline claims cannot be followed by difference: a pipeline's claim or max_delay
    changed (its checked records are others), or its cutoff moved back ('' otherwise)."""
    delays = {p: delay for p, (_, delay) in new.deadlines.items()}
    if delays != {p: delay for p, (_, delay) in old.deadlines.items()}:
        return "claims or max_delay changed"
    if any(cut < old.deadlines[p][0] for p, (cut, _) in new.deadlines.items()):
        return "deadline cutoff moved back"
    return ""


class Engine:
    """Call `cycle` once per analysis run; `reset` after a failed one."""

    def __init__(self) -> None:
        self.state: State | None = None
        self.last = ""  # what the last cycle did, for the progress line

    def reset(self) -> None:
        self.state = None

    def cycle(
        self,
        config: DgmConfig,
        fingerprints: Fingerprints,
        committed: dict[tuple[str, str, int], int],
        now: datetime,
    ) -> tuple[dict[str, pa.Table], pa.Table]:
        """(duplicates, lost, topic_windows, partition_windows as Arrow; pipeline counts for
        pipeline_metrics) of the `fingerprints` now."""
        timings: Timings = {}
        state = self.state
        with timed(timings, "routes"):
            # Rows already on the driver are aggregated there (small_cycle.py says why).
            external = (
                routes_in(fingerprints.external_rows)
                if fingerprints.external_rows is not None
                else routes(fingerprints.external)
                if fingerprints.external is not None
                else Routes()
            )
            if state is None or fingerprints.added is None:
                kept_routes = routes(fingerprints.kept)
            elif fingerprints.added_rows is not None:
                kept_routes = state.kept_routes.merged(routes_in(fingerprints.added_rows))
            else:
                kept_routes = state.kept_routes.merged(routes(fingerprints.added))
        whole_routes = kept_routes.merged(external)
        known = whole_routes.history()
        if fingerprints.audited_from is not None:
            held = claims.sampled_held_from(
                known.held_from, fingerprints.audited_from, config.topic_one_in()
            )
            known = dataclasses.replace(known, held_from=held)
        ctx = context(config, known, committed, now)
        reason = rebuild_reason(state, fingerprints, known, ctx)
        if reason or state is None:
            self.state = None
            state = _rebuilt(fingerprints, ctx, kept_routes, known, whole_routes.topics(), timings)
            self.last = f"rebuilt ({reason})"
        else:
            state, touched, where = _advanced(state, fingerprints, ctx, kept_routes, known, timings)
            self.last = f"{touched} message ids touched {where}"
        self.state = state
        with timed(timings, "tables"):
            result = published(state, present_in_runs(fingerprints.displaced, ctx))
        self.last += " (" + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()) + ")"
        return result


def _rebuilt(
    fingerprints: Fingerprints,
    ctx: Context,
    kept_routes: Routes,
    known: History,
    topics: list[str],
    timings: Timings,
) -> State:
    """The state of every fingerprint; `topics`: every topic they hold (by_id's codes)."""
    whole = fingerprints.whole
    count = fingerprints.counted()  # sizes the shuffles
    # The two passes run side by side: each fills the cores the other leaves idle
    # (bench/HISTORY.md, "The rebuild at 10M: codes into the workers"). The per-id pass's
    # jobs go first: its driver work after (the counts summed) then overlaps the stream
    # pass's, where the other order left it alone at the end ("the driver's tail").
    unstamped = unstamped_among(ctx, kept_routes.unstamped)
    beside = Beside(
        lambda: _streams_of(whole, ctx, count, unstamped),
        timings,
        "runs and order",
        behind=whole.sparkSession.sparkContext,
    )
    try:
        with timed(timings, "per id"):
            rows = by_id(whole, ctx, count, topics)
            rows = rows.unionByName(partition_records(whole, ctx.window_us)).toArrow()
        # Summed while the stream pass still runs (it ends last: bench/HISTORY.md, "The
        # rebuild at 10M: the driver's tail").
        counts = tally.summed(tally.count_rows(rows))
        records = _records(rows)
    except BaseException:
        beside.wait()  # its jobs end before the cycle's failure is told
        raise
    found, behind, marks = beside.result()
    return State(ctx, kept_routes, known, records, counts, found, behind, marks, unstamped)


def _streams_of(
    whole: DataFrame, ctx: Context, count: int, unstamped: frozenset[str]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(the sessions' runs, behind, marks) of every stream; `unstamped`: the sinks the id
    join places (lineage.unstamped_sinks)."""
    runs_rows, order_rows = split_streams(streams(whole, ctx, count, unstamped).toArrow())
    behind, marks = order.split(order_rows)
    return runs_frame(runs_rows), behind, marks


def _records(rows: pa.Table) -> pa.Table:
    return rows.filter(pc.is_in(rows["kind"], pa.array(tally.RECORD_KINDS)))


def _ids(frame: DataFrame) -> DataFrame:
    return frame.where(F.col("message_id").isNotNull()).select("message_id")


def _unidentified(frame: DataFrame) -> DataFrame:
    return frame.where(F.col("message_id").isNull())


def _advanced(
    state: State,
    fingerprints: Fingerprints,
    ctx: Context,
    kept_routes: Routes,
    known: History,
    timings: Timings,
) -> tuple[State, int, str]:
    """The state advanced by the cycle, how many ids it touched, and where their rows were
    worked out: on the driver when they are few (small_cycle.py), else in Spark."""
    assert fingerprints.before is not None and fingerprints.added is not None
    touched: pa.Array | None = None
    changes: list[pa.Table] = []
    if small.works_on_driver(fingerprints):
        changes = small.external_changes(fingerprints)
        touched = small.touched_ids(fingerprints, state.ctx, ctx, changes, timings)
    where = "on the driver"
    if touched is not None and len(touched) <= small.FEW_TOUCHED:
        now_rows, was_rows, cycle, lacking = small.recomputed(
            fingerprints, state.ctx, ctx, touched, changes, state.unstamped, timings
        )
    else:
        where = "in Spark"
        touched, now_rows, was_rows, cycle, lacking = _recomputed_in_spark(
            state, fingerprints, ctx, timings
        )
    advanced = _merged(
        state, ctx, kept_routes, known, touched, now_rows, was_rows, cycle, lacking,
        fingerprints, timings,
    )  # fmt: skip
    return advanced, len(touched), where


def _external_changes(fingerprints: Fingerprints) -> list[tuple[DataFrame, DataFrame]]:
    """(added, removed) external rows: external snapshots are rewritten whole each cycle,
    so their changed rows count as added (now, not before) and removed (before, not now)."""
    if fingerprints.external is None and fingerprints.external_before is None:
        return []
    assert fingerprints.added is not None
    empty = fingerprints.added.limit(0)
    now_ext = fingerprints.external if fingerprints.external is not None else empty
    was_ext = fingerprints.external_before if fingerprints.external_before is not None else empty
    return [(now_ext.exceptAll(was_ext), was_ext.exceptAll(now_ext))]


def _recomputed_in_spark(
    state: State, fingerprints: Fingerprints, ctx: Context, timings: Timings
) -> tuple[pa.Array, pa.Table, pa.Table, pa.Table, frozenset[str]]:
    """(touched ids, their rows now, their rows before, cycle_rows, the sinks found
    unstamped) by Spark passes over the cycle's fingerprints."""
    assert fingerprints.before is not None and fingerprints.added is not None
    spark = fingerprints.kept.sparkSession
    before = _union(fingerprints.before, fingerprints.external_before)
    changed = _external_changes(fingerprints)
    candidates = [_ids(fingerprints.added)]
    for ext_added, ext_removed in changed:
        candidates += [_ids(ext_added), _ids(ext_removed)]
    checked = newly_checked(before, state.ctx, ctx)
    if checked is not None:
        candidates.append(checked)
    with timed(timings, "touched ids"):
        found = reduce(DataFrame.unionByName, candidates).distinct().toArrow()
    touched = found["message_id"].combine_chunks().cast(pa.string())
    ids = F.broadcast(spark.createDataFrame(pa.table({"message_id": touched}), "message_id string"))
    # The kept rows of touched ids, picked out once (a scan of every kept row) for both sides.
    with timed(timings, "select"):
        common = fingerprints.before.join(ids, "message_id", "left_semi").persist()
        held = common.count()
        added = fingerprints.added.count()  # cached since the touched ids were read
    # Every row of a touched id, before and now; rows without an id stand alone.
    was, now = common, common.unionByName(fingerprints.added)
    if fingerprints.external_before is not None:
        was = was.unionByName(fingerprints.external_before.join(ids, "message_id", "left_semi"))
    if fingerprints.external is not None:
        now = now.unionByName(fingerprints.external.join(ids, "message_id", "left_semi"))
    for ext_added, ext_removed in changed:
        now = now.unionByName(_unidentified(ext_added))
        was = was.unionByName(_unidentified(ext_removed))
    # The partitions' record counts change by the rows added, and the external rows removed.
    gained = [fingerprints.added, *(ext_added for ext_added, _ in changed)]
    lost = [ext_removed for _, ext_removed in changed]
    sides = reduce(
        DataFrame.unionByName,
        [
            by_id(now, ctx, held + added).withColumn("sign", F.lit(1)),
            by_id(was, state.ctx, held).withColumn("sign", F.lit(-1)),
            *(partition_records(f, ctx.window_us).withColumn("sign", F.lit(1)) for f in gained),
            *(partition_records(f, ctx.window_us).withColumn("sign", F.lit(-1)) for f in lost),
        ],
    )
    try:
        with timed(timings, "recompute"):
            rows = sides.toArrow()
        with timed(timings, "stream records"):
            # While common is held: the new sink records' source records (the id join,
            # lineage.py) are among the rows of their ids, kept or new: read once, joined
            # on the driver (cycle_streams.py).
            lacking = unstamped_sinks(fingerprints.added, ctx, state.unstamped)
            cycle = cycle_rows(common, fingerprints.added, ctx)
    finally:
        common.unpersist()
    now_rows = rows.filter(pc.equal(rows["sign"], 1)).drop_columns(["sign"])
    was_rows = rows.filter(pc.equal(rows["sign"], -1)).drop_columns(["sign"])
    return touched, now_rows, was_rows, cycle, lacking


def _merged(
    state: State,
    ctx: Context,
    kept_routes: Routes,
    known: History,
    touched: pa.Array,
    now_rows: pa.Table,
    was_rows: pa.Table,
    cycle: pa.Table,
    lacking: frozenset[str],
    fingerprints: Fingerprints,
    timings: Timings,
) -> State:
    """The kept state advanced by the touched ids' rows now and before, and the cycle's
    stream records (cycle_rows)."""
    with timed(timings, "merge"):
        kept = state.records.filter(pc.invert(pc.is_in(state.records["message_id"], touched)))
        records = pa.concat_tables([kept, _records(now_rows).cast(kept.schema)])
        counts = tally.summed(
            state.counts, tally.count_rows(now_rows), tally.count_rows(was_rows, sign=-1)
        )
    with timed(timings, "runs and order"):
        new_records = cycle_stream_records(cycle, ctx, state.unstamped | lacking)
        relinked = cycle_relinks(cycle, ctx, state.unstamped)
        found = runs(
            pd.concat([state.runs, intervals_of(sessions_of(new_records))], ignore_index=True)
        )
        unstamped = state.unstamped | lacking
        behind, marks = _ordered_on(state, new_records, fingerprints, ctx, relinked, unstamped)
    return State(ctx, kept_routes, known, records, counts, found, behind, marks, unstamped)


def _ordered_on(
    state: State,
    new_records: pa.Table,
    fingerprints: Fingerprints,
    ctx: Context,
    relinked: frozenset[tuple[str, int]],
    unstamped: frozenset[str],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(behind, marks) with the committed `new_records` (cycle_streams.cycle_stream_records)
    judged against the kept marks; judged again from every record when some new one does not
    lie above its stream's mark (an audit reads a partition's offsets in increasing ranges;
    records that came otherwise are judged right, at the cost of a pass). The streams of the
    `relinked` partitions (cycle_streams.cycle_relinks: a new source record moved a kept sink
    record into or out of a stream there) are judged again from their own records only."""
    new = order.records_of(new_records.filter(new_records["committed"]))
    behind, marks = _outside(state.behind, relinked), _outside(state.marks, relinked)
    new = _outside(new, relinked)
    if not order.above(new, marks):
        log.info("order: new records below their streams' marks, judged again from all")
        judged = streams(fingerprints.whole, ctx, unstamped=unstamped).toArrow()
        return order.split(split_streams(judged)[1])
    behind_new, marks = order.judge(new, marks)
    found = [behind, behind_new]
    if relinked:
        log.info("order: kept sink copies moved between streams in %d partitions", len(relinked))
        judged = streams_in(fingerprints.whole, ctx, relinked, unstamped).toArrow()
        behind_again, marks_again = order.split(split_streams(judged)[1])
        found.append(behind_again)
        marks = pd.concat([marks, marks_again], ignore_index=True)
    return pd.concat(found, ignore_index=True), marks


def _outside(frame: pd.DataFrame, partitions: frozenset[tuple[str, int]]) -> pd.DataFrame:
    """The rows of `frame` (topic, partition, ...) outside the topic `partitions`."""
    if not partitions or frame.empty:
        return frame
    keys = pd.MultiIndex.from_arrays([frame["topic"], frame["partition"].astype("int64")])
    return frame[~keys.isin(list(partitions))].reset_index(drop=True)


def present_in_runs(displaced: pa.Table | None, ctx: Context) -> pd.DataFrame | None:
    """The truncated source records of producer sessions as one-seq runs: they reached
    Kafka, so their sequence numbers are no gap (docs/design.md, "Log integrity": they are
    lost with the cause truncation instead); None when there are none."""
    if displaced is None or displaced.num_rows == 0:
        return None
    sources = displaced.filter(
        pc.and_(displaced["committed"], pc.is_in(displaced["topic"], pa.array(list(ctx.sources))))
    )
    found = intervals_of(sources.select(list(SESSION_COLUMNS)))
    return None if found.empty else found


def published(
    state: State, present: pd.DataFrame | None = None
) -> tuple[dict[str, pa.Table], pa.Table]:
    """The tables of the kept state: sequence gaps are worked out from the runs each cycle
    (they depend on the cutoff, and the runs are few), with the `present` runs (records
    that reached Kafka outside the fingerprints) merged in; and the order counts from the
    records out of order (each counts once it is read: no cutoff)."""
    partial = list(state.known.held_from)
    found = state.runs if present is None else runs(pd.concat([state.runs, present]))
    gap_lost, gap_counted = gap_rows(found, state.ctx, partial)
    ctx = state.ctx
    attributed = order.per_pipeline(state.behind, ctx.sources, ctx.sinks, ctx.source_topics)
    order_counts = tally.order_counts(state.behind, attributed, ctx.window_us)
    counts = tally.added(state.counts, order_counts)
    pipelines = tally.summed(counts[counts["kind"] == "pipeline"], tally.gap_counts(gap_counted))
    lost = pa.concat_tables(
        [tally.record_table(state.records, "lost", tables.LOST), tally.gap_table(gap_lost)]
    )
    return {
        tables.DUPLICATES.name: tally.record_table(state.records, "duplicates", tables.DUPLICATES),
        tables.LOST.name: lost,
        tables.LATE_RECORDS.name: tally.late_table(state.records),
        tables.TOPIC_WINDOWS.name: tally.topic_windows(counts),
        tables.PARTITION_WINDOWS.name: tally.partition_windows(counts),
        tables.OUT_OF_ORDER.name: tally.out_of_order_table(state.behind, attributed),
    }, tally.pipeline_counts(pipelines)
