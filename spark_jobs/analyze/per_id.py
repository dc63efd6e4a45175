"""Everything about one message id, worked out where all its records are: its copies and
their cause, whether a pipeline lost it or read it from an aborted transaction, and its
share of the per-window counts.

Pure functions of pandas frames, run by spark_jobs.analyze.passes (`by_id`) inside each
partition of one shuffle of the fingerprints by message id (every record of an id, in every
topic, lands in one partition), so no per-table query needs its own shuffle. The words are
docs/design.md's; the rules are the duplicates and loss modules' functions, applied here to
each pipeline's rows (this module works out which rows those are: sources, sinks, routes);
the counts a partition emits are partial sums the engine adds up per key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from dgm.contracts.clusters import EXTERNAL_PREFIX
from dgm.contracts.vocabulary import DuplicateCause, LossCause
from spark_jobs.analyze import duplicates as duplicate_rules
from spark_jobs.analyze import loss as loss_rules
from spark_jobs.analyze.id_frame import ABSENT, Names, frame_of, marked
from spark_jobs.analyze.output import NO_TIME, rows_of


@dataclass(frozen=True)
class Context:
    """What every partition needs beyond its own records: small, shipped with the task."""

    # topic -> pipelines reading it (source) / writing it (sink, external names included)
    sources: Mapping[str, tuple[str, ...]]
    sinks: Mapping[str, tuple[str, ...]]
    # pipeline -> its source topics; plain topic (no pipeline's sink) -> the topics its
    # records name in dgm-src, the only source its duplicates' causes can look at
    source_topics: Mapping[str, tuple[str, ...]]
    plain_sources: Mapping[str, tuple[str, ...]]
    # (pipeline, topic, partition) -> claimed offset (loss.claimed_offsets)
    claimed: Mapping[tuple[str, str, int], int]
    # pipeline -> newest held_from (micros) of its sink partitions (loss.sink_held_from)
    sink_held_from: Mapping[str, int] = field(default_factory=dict)
    cutoff_us: int = 0  # the grace cutoff (loss.cutoff_us)
    window_us: int = 60_000_000
    # deadline-claim pipeline -> (deadline cutoff, max_delay), micros (loss.deadline_cutoffs)
    deadlines: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    # pipeline -> its `expected` predicate ("" for none): the fingerprints' filtered_by and
    # filter_undecided_by were marked under these (the engine rebuilds when they change)
    expected: Mapping[str, str] = field(default_factory=dict)
    # Topics kept 1 in N ids (dgm/contracts/sampling.py): their producer sessions and streams have
    # holes where the ids not kept were, so no sequence gap or order is looked for in them.
    sampled: Mapping[str, int] = field(default_factory=dict)  # topic -> N


# The fingerprint columns the per-id work reads (passes.by_id ships no others; src_* are
# dgm-src parsed, which the causes compare raw as `lineage`).
COLUMNS = (
    "topic", "partition", "offset", "timestamp", "message_id", "key", "producer", "seq",
    "lineage", "committed", "filtered_by", "filter_undecided_by",
)  # fmt: skip


def per_pipeline(
    frame: pd.DataFrame, by_topic: Mapping[Any, tuple[Any, ...]], dtype: str = "object"
) -> pd.DataFrame:
    """`frame`'s rows once per pipeline `by_topic` names for their topic, with `pipeline`
    (of `dtype`: names, or id_frame's codes)."""
    # A filter per (topic, pipeline), not a merge: the pairs are few, and a join on the
    # topic strings cost a quarter of per_id's time.
    parts = [
        frame[frame["topic"] == topic].assign(pipeline=name)
        for topic, names in by_topic.items()
        for name in names
    ]
    if not parts:
        return frame.iloc[0:0].assign(pipeline=pd.Series(dtype=dtype))
    return pd.concat(parts, ignore_index=True)


def _routes(sink_topics: np.ndarray, context: Context, names: Names) -> pd.DataFrame:
    """(topic, pipeline, source_topic) codes: where a duplicated id of each sink topic may
    come from (pipeline ABSENT for a topic that is no pipeline's sink; source_topic ABSENT
    when there is none or this partition holds none of it)."""
    mapping: list[tuple[int, int, int]] = []
    for topic, pipelines in context.sinks.items():
        code = names.topic(topic)
        if code != ABSENT:
            for p in pipelines:
                mapping += [
                    (code, names.pipeline(p), names.topic(u))
                    for u in context.source_topics[p] or (None,)
                ]
    for code in sink_topics:
        topic = names.topics[code]
        if topic not in context.sinks:
            mapping += [
                (code, ABSENT, names.topic(u)) for u in context.plain_sources.get(topic) or (None,)
            ]
    return pd.DataFrame(mapping, columns=["topic", "pipeline", "source_topic"], dtype="int64")


def causes(
    frame: pd.DataFrame, batch: pa.Table, copied: pd.DataFrame, context: Context, names: Names
) -> pd.DataFrame:
    """(topic, message_id, pipeline, cause) per duplicated id of `copied` and each pipeline
    whose sink the topic is (pipeline ABSENT for a topic that is no pipeline's sink)."""
    if copied.empty:
        return pd.DataFrame(
            {
                "topic": pd.Series(dtype="int64"),
                "message_id": pd.Series(dtype="int64"),
                "pipeline": pd.Series(dtype="int64"),
                "cause": pd.Series(dtype=object),
            }
        )
    # The sink-side evidence, for copies only: taken from the records, not carried by all.
    evidence = batch.select(["producer", "seq", "lineage"]).take(pa.array(copied["_row"]))
    producer, seq, lineage = (evidence.column(n).to_pandas() for n in evidence.column_names)
    producer.index = seq.index = lineage.index = copied.index
    sink_side = duplicate_rules.sink_evidence(copied, producer, seq, lineage)
    routes = _routes(sink_side["topic"].unique(), context, names)
    held = frame[frame["has_id"]]
    source = (
        held.groupby(["topic", "message_id"])["committed"]
        .agg(committed_copies="sum", records="size")
        .reset_index()
        .rename(columns={"topic": "source_topic"})
    )
    routed = sink_side.merge(routes, on="topic").merge(
        source, on=["source_topic", "message_id"], how="left"
    )
    per_key = (
        routed.fillna({"committed_copies": 0, "records": 0})
        .groupby(["topic", "message_id", "pipeline"])
        .agg(
            committed_copies=("committed_copies", "sum"),
            records=("records", "sum"),
            repeated_send=("repeated_send", "first"),
            repeated_source=("repeated_source", "first"),
        )
        .reset_index()
    )
    cause = duplicate_rules.cause(
        per_key["committed_copies"],
        per_key["records"],
        per_key["repeated_send"],
        per_key["repeated_source"],
    )
    return per_key[["topic", "message_id", "pipeline"]].assign(cause=cause)


def duplicates(
    frame: pd.DataFrame, batch: pa.Table, context: Context, names: Names
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(copies, duplicates): every copy, and every copy once per cause row of its id."""
    copied = duplicate_rules.copies(frame)
    found = causes(frame, batch, copied, context, names)
    return copied, copied.merge(found, on=["topic", "message_id"])


def deadlines(context: Context, names: Names) -> pd.DataFrame:
    """(pipeline, deadline_us, max_delay_us) of the deadline-claim pipelines, in codes."""
    return pd.DataFrame(
        [(names.pipeline(p), cut, delay) for p, (cut, delay) in context.deadlines.items()],
        columns=["pipeline", "deadline_us", "max_delay_us"],
        dtype="int64",
    )


def loss(
    sources: pd.DataFrame, sinks: pd.DataFrame, context: Context, names: Names
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """loss.lost (checked, lost) of `sources` (identified source rows per pipeline) and `sinks`
    (committed sink rows per pipeline), with the Context's claims and deadlines in this
    partition's codes."""
    claims = pd.DataFrame(
        [
            (names.pipeline(p), names.topic(t), part, offset)
            for (p, t, part), offset in context.claimed.items()
        ],
        columns=["pipeline", "topic", "partition", "claimed_offset"],
        dtype="int64",
    )
    held = {names.pipeline(p): at for p, at in context.sink_held_from.items()}
    return loss_rules.lost(
        sources, sinks, claims, context.cutoff_us, held, deadlines(context, names)
    )


def late(
    checked: pd.DataFrame, sinks: pd.DataFrame, context: Context, names: Names
) -> pd.DataFrame:
    """loss.late: the late records of the deadline pipelines (none without one)."""
    if not context.deadlines:
        return checked.iloc[0:0]
    return loss_rules.late(checked, sinks, deadlines(context, names))


def loss_causes(first_lost: pd.DataFrame, context: Context, names: Names) -> pd.Series:
    """The cause of each lost row: a deadline claim's, or a group claim's."""
    by_deadline = first_lost["pipeline"].isin([names.pipeline(p) for p in context.deadlines])
    return by_deadline.map(
        {
            True: LossCause.NOT_IN_SINK_WITHIN_MAX_DELAY.value,
            False: LossCause.NOT_IN_SINK.value,
        }
    ).astype(object)


def with_causes(
    first_lost: pd.DataFrame, aborted: pd.DataFrame, context: Context, names: Names
) -> pd.DataFrame:
    """`first_lost` with `cause` and, for a torn commit (a group or sink-offset claim's lost
    id the sink holds in aborted transactions; loss.first_aborted_copies), its first aborted
    sink copy as `aborted_copy` ('topic/partition/offset'). `aborted`: identified aborted
    sink rows per pipeline."""
    cause = loss_causes(first_lost, context, names)
    copies = loss_rules.first_aborted_copies(aborted)
    keys = ["pipeline", "message_id"]
    found = first_lost[keys].merge(copies, on=keys, how="left").set_index(first_lost.index)
    torn = found["offset"].notna() & (cause == LossCause.NOT_IN_SINK.value)
    shown = pd.Series(None, index=first_lost.index, dtype=object)
    if torn.any():
        held = found[torn]
        topics = names.topic_names(held["topic"].astype("int64"))
        shown[torn] = [
            f"{t}/{p}/{o}"
            for t, p, o in zip(topics, held["partition"].astype("int64"),
                               held["offset"].astype("int64"), strict=True)
        ]  # fmt: skip
    return first_lost.assign(
        missing=1, cause=cause.where(~torn, LossCause.TORN_COMMIT.value), aborted_copy=shown
    )


def window_of(ts: pd.Series, has_ts: pd.Series, window_us: int) -> pd.Series:
    """Start (micros) of the window holding each time; NO_TIME for rows without one."""
    return ts.where(~has_ts, ts - ts % window_us).where(has_ts, NO_TIME)


def counted(rows: pd.DataFrame, window_us: int, **counts: pd.Series | int) -> pd.DataFrame:
    """(pipeline, window_us, *counts) per row of `rows` (which has pipeline, ts, has_ts)."""
    columns = {
        "pipeline": rows["pipeline"].to_numpy(),
        "window_us": window_of(rows["ts"], rows["has_ts"], window_us).to_numpy(),
    }
    for name, value in counts.items():
        columns[name] = (
            value.astype("int64").to_numpy()
            if isinstance(value, pd.Series)
            else np.full(len(rows), value)
        )
    return pd.DataFrame(columns)


def pipeline_counts(
    frame: pd.DataFrame,
    sinks: pd.DataFrame,
    duplicate_rows: pd.DataFrame,
    checked: pd.DataFrame,
    first_lost: pd.DataFrame,
    aborted: pd.DataFrame,
    context: Context,
    names: Names,
    late_rows: pd.DataFrame | None = None,
    marked: tuple[pd.DataFrame, pd.DataFrame] | None = None,
) -> pd.DataFrame:
    """Per (pipeline, window_us): output.PIPELINE_COUNTS, distinct_ids (sink ids per topic) and the
    span of checked records (first/last_checked_us); window_us NO_TIME for rows without a
    timestamp (they count in totals only). `sinks`: committed sink rows per pipeline."""
    w = context.window_us
    unidentified = frame[frame["committed"] & ~frame["has_id"]]
    source = per_pipeline(unidentified, names.by_topic(context.sources), "int64")
    attributed = duplicate_rows[
        (duplicate_rows["pipeline"] != ABSENT) & duplicate_rows["is_extra_copy"]
    ]
    upstream = attributed["cause"] == DuplicateCause.UPSTREAM.value
    beyond = checked[checked["is_beyond"]]
    parts = [
        counted(checked, w, records_checked=1),
        counted(beyond, w, records_checked=-1, beyond_retention=1),
        counted(first_lost, w, lost=1),
        counted(first_lost, w, torn_commits=first_lost["cause"] == LossCause.TORN_COMMIT.value),
        counted(aborted, w, aborted_reads=1),
        counted(sinks, w, sink_records=1, unidentified=~sinks["has_id"]),
        counted(source, w, unidentified=1),
        counted(attributed, w, duplicate_copies=~upstream, upstream_duplicates=upstream),
    ]
    if late_rows is not None and not late_rows.empty:
        parts.append(counted(late_rows, w, late_records=1))
    if marked is not None:
        parts += [counted(marked[0], w, filtered=1), counted(marked[1], w, filter_undecided=1)]
    counts = pd.concat(parts, ignore_index=True).fillna(0)
    summed = counts.groupby(["pipeline", "window_us"]).sum().reset_index()
    ids = sinks[sinks["has_id"]]
    ids = ids.assign(window_us=window_of(ids["ts"], ids["has_ts"], w))
    totals = ids.drop_duplicates(["pipeline", "topic", "message_id"]).groupby("pipeline").size()
    per_window = (
        ids[ids["has_ts"]]
        .drop_duplicates(["pipeline", "topic", "window_us", "message_id"])
        .groupby(["pipeline", "window_us"])
        .size()
    )
    checked_windows = window_of(checked["ts"], checked["has_ts"], w)
    spans = (
        checked[~checked["is_beyond"]]
        .assign(window_us=checked_windows)
        .groupby(["pipeline", "window_us"])["ts"]
        .agg(first_checked_us="min", last_checked_us="max")
    )
    summed = summed.merge(
        per_window.rename("distinct_ids").reset_index(), on=["pipeline", "window_us"], how="outer"
    ).merge(spans.reset_index(), on=["pipeline", "window_us"], how="outer")
    total_rows = totals.rename("distinct_ids").reset_index().assign(window_us=NO_TIME, total=True)
    return pd.concat([summed.assign(total=False), total_rows], ignore_index=True)


def topic_counts(frame: pd.DataFrame, copied: pd.DataFrame, window_us: int) -> pd.DataFrame:
    """Per (topic, window_us) and per topic (total): records, distinct_ids, identified,
    unidentified, aborted, and duplicate_copies (extra copies) in windows."""
    committed = frame["committed"]
    flags = pd.DataFrame(
        {
            "topic": frame["topic"],
            "window_us": window_of(frame["ts"], frame["has_ts"], window_us),
            "has_ts": frame["has_ts"],
            "records": committed.astype("int64"),
            "identified": (committed & frame["has_id"]).astype("int64"),
            "unidentified": (committed & ~frame["has_id"]).astype("int64"),
            "aborted": (~committed).astype("int64"),
        }
    )
    ids = frame[committed & frame["has_id"]]
    ids = ids.assign(window_us=window_of(ids["ts"], ids["has_ts"], window_us))
    sums = ["records", "identified", "unidentified", "aborted"]
    timed = flags[flags["has_ts"]].groupby(["topic", "window_us"])[sums].sum()
    timed["distinct_ids"] = (
        ids[ids["has_ts"]]
        .drop_duplicates(["topic", "window_us", "message_id"])
        .groupby(["topic", "window_us"])
        .size()
    )
    extra = copied[copied["is_extra_copy"] & copied["has_ts"]]
    timed["duplicate_copies"] = extra.groupby(
        [extra["topic"], window_of(extra["ts"], extra["has_ts"], window_us).rename("window_us")]
    ).size()
    total = flags.groupby("topic")[sums].sum()
    total["distinct_ids"] = ids.drop_duplicates(["topic", "message_id"]).groupby("topic").size()
    return pd.concat(
        [
            timed.fillna(0).reset_index().assign(total=False),
            total.fillna(0).reset_index().assign(window_us=NO_TIME, total=True),
        ],
        ignore_index=True,
    )


def partition_counts(frame: pd.DataFrame, copied: pd.DataFrame, window_us: int) -> pd.DataFrame:
    """Per (topic, partition, window_us) of timed rows: records, aborted, duplicate_copies."""
    timed = frame[frame["has_ts"]]
    keys = [timed["topic"], timed["partition"], window_of(timed["ts"], timed["has_ts"], window_us)]
    counts = pd.DataFrame(
        {
            "records": timed["committed"].astype("int64").groupby(keys).sum(),
            "aborted": (~timed["committed"]).astype("int64").groupby(keys).sum(),
        }
    )
    extra = copied[copied["is_extra_copy"] & copied["has_ts"]]
    extra_keys = [
        extra["topic"],
        extra["partition"],
        window_of(extra["ts"], extra["has_ts"], window_us),
    ]
    counts["duplicate_copies"] = extra.groupby(extra_keys).size()
    counts = counts.fillna(0)
    counts.index.names = ["topic", "partition", "window_us"]
    return counts.reset_index()


def _named(rows: pd.DataFrame, names: Names) -> pd.DataFrame:
    """`rows` with topic and pipeline names in place of their codes."""
    named = {}
    if "topic" in rows:
        named["topic"] = names.topic_names(rows["topic"])
    if "pipeline" in rows:
        named["pipeline"] = names.pipeline_names(rows["pipeline"])
    return rows.assign(**named)


def _pipelines(context: Context) -> set[str]:
    named = [*context.sources.values(), *context.sinks.values()]
    return {*context.source_topics, *(p for ps in named for p in ps)}


def _row_pairs(rows: pd.DataFrame) -> pd.Index:
    """(pipeline code, _row) as one integer, to match id_frame.marked's pairs."""
    return pd.Index(rows["pipeline"].to_numpy(dtype="int64") * 2**32 + rows["_row"].to_numpy())


def expected_sources(
    frame: pd.DataFrame, batch: pa.Table, sources: pd.DataFrame, context: Context, names: Names
) -> tuple[pd.DataFrame, tuple[pd.DataFrame, pd.DataFrame] | None]:
    """(the identified source rows per pipeline its predicate does not filter; the committed
    source rows per pipeline filtered, and those undecided), docs/design.md's "filtered".
    (sources, None) when no record of this partition is marked."""
    filtered = marked(batch, "filtered_by", names)
    undecided = marked(batch, "filter_undecided_by", names)
    if filtered.empty and undecided.empty:
        return sources, None
    committed = per_pipeline(frame[frame["committed"]], names.by_topic(context.sources), "int64")
    pairs = _row_pairs(committed)
    kept = sources[~_row_pairs(sources).isin(filtered)]
    return kept, (committed[pairs.isin(filtered)], committed[pairs.isin(undecided)])


def per_id_rows(batch: pa.Table, context: Context) -> pa.Table:
    """Every output row one partition of id-shuffled fingerprints gives (output.SCHEMA)."""
    frame, names = frame_of(batch, _pipelines(context))
    # Each pipeline's identified source rows and committed sink rows, worked out once.
    held = per_pipeline(frame[frame["has_id"]], names.by_topic(context.sources), "int64")
    sources, flagged = expected_sources(frame, batch, held, context, names)
    sinks = per_pipeline(frame[frame["committed"]], names.by_topic(context.sinks), "int64")
    copied, duplicate_rows = duplicates(frame, batch, context, names)
    checked, first_lost = loss(sources, sinks, context, names)
    # Aborted sink rows are a Kafka sink's: an external table holds what it committed.
    aborted = frame[~frame["committed"] & frame["has_id"]]
    kafka_sinks = {t: ps for t, ps in context.sinks.items() if not t.startswith(EXTERNAL_PREFIX)}
    first_lost = with_causes(
        first_lost, per_pipeline(aborted, names.by_topic(kafka_sinks), "int64"), context, names
    )
    counts = pipeline_counts(
        frame,
        sinks,
        duplicate_rows,
        checked,
        first_lost,
        loss_rules.aborted_reads(held, sinks),
        context,
        names,
        late(checked, sinks, context, names),
        flagged,
    )
    return rows_of(
        batch,
        duplicates=_named(duplicate_rows, names),
        lost=_named(first_lost, names),
        pipeline=_named(counts, names),
        topic=_named(topic_counts(frame, copied, context.window_us), names),
        partition=_named(partition_counts(frame, copied, context.window_us), names),
    )
