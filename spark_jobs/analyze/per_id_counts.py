"""The per-window counts one partition of the fingerprints shuffled by message id gives
(per_id.per_id_rows): per pipeline, topic and topic partition, partial sums over the ids of
the partition, which the engine adds up per key and keeps between cycles (counts.py).

Pure functions of pandas frames (id_frame's codes); window_us is NO_TIME for rows without a
timestamp (they count in totals only). Sequence gaps, worked out per producer session on the
driver, are counted per pipeline window by `counted` too (per_session.gap_rows).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dgm.contracts.vocabulary import DuplicateCause, LossCause
from spark_jobs.analyze.id_frame import ABSENT, distinct
from spark_jobs.analyze.output import NO_TIME


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
    sinks: pd.DataFrame,
    duplicate_rows: pd.DataFrame,
    checked: pd.DataFrame,
    first_lost: pd.DataFrame,
    aborted: pd.DataFrame,
    unidentified: pd.DataFrame,
    window_us: int,
    late_rows: pd.DataFrame | None = None,
    marked: tuple[pd.DataFrame, pd.DataFrame] | None = None,
) -> pd.DataFrame:
    """Per (pipeline, window_us): output.PIPELINE_COUNTS, distinct_ids (sink ids per topic) and the
    span of checked records (first/last_checked_us); window_us NO_TIME for rows without a
    timestamp (they count in totals only). Rows per pipeline, as per_id picks them out:
    `sinks` committed sink rows, `aborted` aborted reads (loss.aborted_reads),
    `unidentified` committed source rows without an id, `marked` the (filtered, undecided)
    source rows (per_id.expected_sources)."""
    w = window_us
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
        counted(unidentified, w, unidentified=1),
        counted(attributed, w, duplicate_copies=~upstream, upstream_duplicates=upstream),
    ]
    if late_rows is not None and not late_rows.empty:
        parts.append(counted(late_rows, w, late_records=1))
    if marked is not None:
        parts += [counted(marked[0], w, filtered=1), counted(marked[1], w, filter_undecided=1)]
    # Each part summed alone first: one frame of every part's rows would be mostly NaN to fill.
    keys = ["pipeline", "window_us"]
    counts = pd.concat([part.groupby(keys).sum() for part in parts]).fillna(0)
    summed = counts.groupby(keys).sum().reset_index()
    ids = sinks[sinks["has_id"]]
    ids = ids.assign(window_us=window_of(ids["ts"], ids["has_ts"], w))
    totals = distinct(ids, ["pipeline", "topic", "message_id"]).groupby("pipeline").size()
    per_window = (
        distinct(ids[ids["has_ts"]], ["pipeline", "topic", "window_us", "message_id"])
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
        distinct(ids[ids["has_ts"]], ["topic", "window_us", "message_id"])
        .groupby(["topic", "window_us"])
        .size()
    )
    extra = copied[copied["is_extra_copy"] & copied["has_ts"]]
    timed["duplicate_copies"] = extra.groupby(
        [extra["topic"], window_of(extra["ts"], extra["has_ts"], window_us).rename("window_us")]
    ).size()
    total = flags.groupby("topic")[sums].sum()
    total["distinct_ids"] = distinct(ids, ["topic", "message_id"]).groupby("topic").size()
    return pd.concat(
        [
            timed.fillna(0).reset_index().assign(total=False),
            total.fillna(0).reset_index().assign(window_us=NO_TIME, total=True),
        ],
        ignore_index=True,
    )


def partition_counts(copied: pd.DataFrame, window_us: int) -> pd.DataFrame:
    """Per (topic, partition, window_us) of timed extra copies: duplicate_copies. Only the
    windows holding one: the partitions' records need no id (record_counts.py)."""
    extra = copied[copied["is_extra_copy"] & copied["has_ts"]]
    keys = [
        extra["topic"],
        extra["partition"],
        window_of(extra["ts"], extra["has_ts"], window_us).rename("window_us"),
    ]
    return extra.groupby(keys).size().rename("duplicate_copies").reset_index()
