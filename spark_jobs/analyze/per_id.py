"""Everything about one message id, worked out where all its records are: its copies and
their cause, whether a pipeline lost it or read it from an aborted transaction, and its
share of the per-window counts.

Pure functions of pandas frames, run by `spark_jobs.analyze.engine` inside each partition of
one shuffle of the fingerprints by message id (every record of an id, in every topic, lands
in one partition), so no per-table query needs its own shuffle. The words and rules are
docs/design.md's and the module docstrings of `duplicates` and `loss` say them once; the
counts a partition emits are partial sums the engine adds up per key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.analyze.duplicates import (
    ABORTED_READ,
    PRODUCER_RETRY,
    REPROCESSING,
    UNKNOWN,
    UPSTREAM,
)
from spark_jobs.analyze.loss import NOT_IN_SINK
from spark_jobs.analyze.output import NO_TIME, rows_of

_NONE = "\u0000"  # stands for "no pipeline" in keys (names hold no NUL)


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
    cutoff_us: int = 0
    window_us: int = 60_000_000


# The fingerprint columns the per-id work reads (the engine ships no others; src_* are
# dgm-src parsed, which the causes compare raw as `lineage`).
COLUMNS = (
    "topic", "partition", "offset", "timestamp", "message_id", "key", "producer", "seq",
    "lineage", "committed",
)  # fmt: skip


def frame_of(batch: pa.Table) -> pd.DataFrame:
    """Fingerprint rows as pandas: `ts` in micros (NO_TIME when null, which sorts first as
    Spark's ascending order does), `has_ts`, `_row`, and `message_id` as _codes (ids are only
    compared here; output rows take them from `batch` by `_row`)."""
    stamp = batch.column("timestamp").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    ids = batch.column("message_id").combine_chunks()
    frame = pd.DataFrame(
        {
            "topic": batch.column("topic").to_pandas(),
            "partition": batch.column("partition").to_pandas(),
            "offset": batch.column("offset").to_pandas(),
            "has_ts": pc.is_valid(stamp).to_pandas(),
            "ts": pc.fill_null(stamp, NO_TIME).to_pandas(),
            "message_id": _codes(ids),
            "producer": batch.column("producer").to_pandas(),
            "seq": batch.column("seq").to_pandas(),
            "lineage": batch.column("lineage").to_pandas(),
            "committed": batch.column("committed").to_pandas(),
        }
    )
    frame["_row"] = np.arange(len(frame))
    frame["has_id"] = pc.is_valid(ids).to_pandas()
    return frame


def _codes(strings: pa.Array | pa.ChunkedArray) -> pd.Series:
    """An integer per distinct string, -1 for null: grouping and merging on integers, not on
    Arrow strings (a fifth of per_id's time went to factorizing message ids)."""
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    codes = strings.dictionary_encode().indices.cast(pa.int64())
    return pc.fill_null(codes, -1).to_pandas()


def window_of(ts: pd.Series, has_ts: pd.Series, window_us: int) -> pd.Series:
    """Start (micros) of the window holding each time; NO_TIME for rows without one."""
    return ts.where(~has_ts, ts - ts % window_us).where(has_ts, NO_TIME)


def per_pipeline(frame: pd.DataFrame, by_topic: Mapping[str, tuple[str, ...]]) -> pd.DataFrame:
    """`frame`'s rows once per pipeline `by_topic` names for their topic, with `pipeline`."""
    # A filter per (topic, pipeline), not a merge: the pairs are few, and a join on the
    # topic strings cost a quarter of per_id's time.
    parts = [
        frame[frame["topic"] == topic].assign(pipeline=name)
        for topic, names in by_topic.items()
        for name in names
    ]
    if not parts:
        return frame.iloc[0:0].assign(pipeline=pd.Series(dtype=object))
    return pd.concat(parts, ignore_index=True)


def copies(frame: pd.DataFrame) -> pd.DataFrame:
    """Every committed, identified copy of an id held more than once in a topic, with
    `copies` and `copy_number` (1 for the first by timestamp, partition, offset)."""
    kept = frame[frame["committed"] & frame["has_id"]]
    count = kept.groupby(["topic", "message_id"])["_row"].transform("size")
    repeated = kept[count > 1].assign(copies=count[count > 1])
    ordered = repeated.sort_values(["topic", "message_id", "ts", "partition", "offset"])
    numbered = ordered.groupby(["topic", "message_id"]).cumcount() + 1
    return ordered.assign(copy_number=numbered, is_extra_copy=numbered > 1)


def _repeats(values: pd.Series, keys: list[pd.Series]) -> pd.Series:
    """Per key: does a non-null value occur more than once (count > count distinct)."""
    grouped = values.groupby(keys)
    return grouped.count() > grouped.nunique()


def causes(frame: pd.DataFrame, copied: pd.DataFrame, context: Context) -> pd.DataFrame:
    """(topic, message_id, pipeline, cause) per duplicated id of `copied` and each pipeline
    whose sink the topic is (pipeline None for a topic that is no pipeline's sink)."""
    if copied.empty:
        return pd.DataFrame(columns=["topic", "message_id", "pipeline", "cause"])
    keys = [copied["topic"], copied["message_id"]]
    send = copied["producer"] + "\u0000" + copied["seq"].astype("Int64").astype(str)
    send = send.where(copied["producer"].notna() & copied["seq"].notna())
    sink_side = pd.DataFrame(
        {
            "producer_retry": _repeats(send, keys),
            "reprocessing": _repeats(copied["lineage"], keys),
        }
    ).reset_index()
    sink_side.columns = ["topic", "message_id", "producer_retry", "reprocessing"]
    mapping: list[tuple[str, str, str | None]] = [
        (t, p, u) for t, ps in context.sinks.items() for p in ps for u in context.source_topics[p]
    ]
    mapping += [
        (t, p, None) for t, ps in context.sinks.items() for p in ps if not context.source_topics[p]
    ]
    mapping += [
        (t, _NONE, u)
        for t in sink_side["topic"].unique()
        if t not in context.sinks
        for u in (context.plain_sources.get(t) or (None,))
    ]
    routes = pd.DataFrame(mapping, columns=["topic", "pipeline", "source_topic"])
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
            producer_retry=("producer_retry", "first"),
            reprocessing=("reprocessing", "first"),
        )
        .reset_index()
    )
    upstream = per_key["committed_copies"] > 1
    aborted = (per_key["committed_copies"] == 0) & (per_key["records"] > 0)
    cause = np.select(
        [aborted, per_key["producer_retry"], per_key["reprocessing"], upstream],
        [ABORTED_READ, PRODUCER_RETRY, REPROCESSING, UPSTREAM],
        UNKNOWN,
    )
    pipeline = per_key["pipeline"].where(per_key["pipeline"] != _NONE, None)
    return pd.DataFrame(
        {
            "topic": per_key["topic"],
            "message_id": per_key["message_id"],
            "pipeline": pipeline,
            "cause": cause,
        }
    )


def duplicates(frame: pd.DataFrame, context: Context) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(copies, duplicates): every copy, and every copy once per cause row of its id."""
    copied = copies(frame)
    return copied, copied.merge(causes(frame, copied, context), on=["topic", "message_id"])


def loss(frame: pd.DataFrame, context: Context) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(checked, lost): checked source rows per pipeline with `is_beyond` (missing from the
    sink, beyond retention) and `counted` (missing, not beyond retention); lost rows, one
    per pipeline and id at its first checked source record."""
    source = per_pipeline(frame[frame["committed"] & frame["has_id"]], context.sources)
    claims = pd.DataFrame(
        [(p, t, part, offset) for (p, t, part), offset in context.claimed.items()],
        columns=["pipeline", "topic", "partition", "claimed_offset"],
    )
    timely = source[source["has_ts"] & (source["ts"] < context.cutoff_us)]
    checked = timely.merge(claims, on=["pipeline", "topic", "partition"])
    checked = checked[checked["offset"] < checked["claimed_offset"]]
    sink_ids = _sink_ids(frame, context)
    key = pd.MultiIndex.from_frame(checked[["pipeline", "message_id"]])
    missing = ~key.isin(sink_ids)
    horizon = checked["pipeline"].map(context.sink_held_from).astype("float64")
    beyond = missing & horizon.notna() & (checked["ts"] < horizon.fillna(NO_TIME))
    checked = checked.assign(is_beyond=beyond, counted=missing & ~beyond)
    first = (
        checked[checked["counted"]]
        .sort_values(["pipeline", "message_id", "ts", "topic", "partition", "offset"])
        .drop_duplicates(["pipeline", "message_id"])
    )
    return checked, first


def _sink_ids(frame: pd.DataFrame, context: Context) -> pd.MultiIndex:
    sink = per_pipeline(frame[frame["committed"] & frame["has_id"]], context.sinks)
    return pd.MultiIndex.from_frame(sink[["pipeline", "message_id"]].drop_duplicates())


def aborted_reads(frame: pd.DataFrame, context: Context) -> pd.DataFrame:
    """Committed sink rows (per pipeline) of ids the pipeline's source holds only aborted."""
    source = per_pipeline(frame[frame["has_id"]], context.sources)
    any_committed = source.groupby(["pipeline", "message_id"])["committed"].any()
    only_aborted = any_committed[~any_committed].index
    sink = per_pipeline(frame[frame["committed"] & frame["has_id"]], context.sinks)
    key = pd.MultiIndex.from_frame(sink[["pipeline", "message_id"]])
    return sink[key.isin(only_aborted)]


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
    duplicate_rows: pd.DataFrame,
    checked: pd.DataFrame,
    first_lost: pd.DataFrame,
    context: Context,
) -> pd.DataFrame:
    """Per (pipeline, window_us): output.PIPELINE_COUNTS, distinct_ids (sink ids per topic) and the
    span of checked records (first/last_checked_us); window_us NO_TIME for rows without a
    timestamp (they count in totals only)."""
    w = context.window_us
    sink = per_pipeline(frame[frame["committed"]], context.sinks)
    source = per_pipeline(frame[frame["committed"] & ~frame["has_id"]], context.sources)
    attributed = duplicate_rows[
        duplicate_rows["pipeline"].notna() & duplicate_rows["is_extra_copy"]
    ]
    upstream = attributed["cause"] == UPSTREAM
    beyond = checked[checked["is_beyond"]]
    parts = [
        counted(checked, w, records_checked=1),
        counted(beyond, w, records_checked=-1, beyond_retention=1),
        counted(first_lost, w, lost=1),
        counted(aborted_reads(frame, context), w, aborted_reads=1),
        counted(sink, w, sink_records=1, unidentified=~sink["has_id"]),
        counted(source, w, unidentified=1),
        counted(attributed, w, duplicate_copies=~upstream, upstream_duplicates=upstream),
    ]
    counts = pd.concat(parts, ignore_index=True).fillna(0)
    summed = counts.groupby(["pipeline", "window_us"]).sum().reset_index()
    ids = sink[sink["has_id"]]
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


def per_id_rows(batch: pa.Table, context: Context) -> pa.Table:
    """Every output row one partition of id-shuffled fingerprints gives (output.SCHEMA)."""
    frame = frame_of(batch)
    copied, duplicate_rows = duplicates(frame, context)
    checked, first_lost = loss(frame, context)
    return rows_of(
        batch,
        duplicates=duplicate_rows,
        lost=first_lost.assign(missing=1, cause=NOT_IN_SINK),
        pipeline=pipeline_counts(frame, duplicate_rows, checked, first_lost, context),
        topic=topic_counts(frame, copied, context.window_us),
        partition=partition_counts(frame, copied, context.window_us),
    )
