"""Consumer-group status: Burrow's evaluation rules over lag from the LSO (docs/design.md,
"Consumer-group status").

Each partition a group committed is judged over its last `analysis.group_status_window`
collector samples (group_offsets). The samples of a window are summed up into a `Window`, and
each rule is written once over a Window; `partition_status()` judges a list of samples,
`group_status()` the published table's rows. The group's status is its worst partition's.

Lag is from the LSO, so records a read_committed consumer cannot read yet (an open
transaction's, markers past the LSO) are no lag: a consumer caught up to a pinned LSO has lag 0
and is OK, where lag from the high watermark would call it STALL (`status_from_hw`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa

from dgm.contracts import published as tables
from dgm.contracts.vocabulary import GroupStatus
from spark_jobs.analyze.group_windows import Spans, window_fields
from spark_jobs.analyze.lag_seconds import nanos
from spark_jobs.analyze.lag_seconds import pace as lag_pace
from spark_jobs.analyze.publish import arrow_of

# The statuses and their severities (the group_status alert metric) are dgm.contracts.vocabulary's
# GroupStatus; a group takes its worst partition's.


@dataclass(frozen=True)
class Window:
    """One partition's window of samples, as the rules read it. Lags are clamped at 0 (a
    read_uncommitted group can commit past the LSO)."""

    samples: Any  # samples in the window
    lag_start: Any  # lag at the oldest sample of the window
    lag_end: Any  # lag at the newest sample
    lag_min: Any  # smallest lag in the window
    lag_never_fell: Any  # no sample's lag is below the one before it
    committed_start: Any
    committed_end: Any
    rewound: Any  # a sample's committed offset is below the one before it
    # The committed offset has not moved since the window began: last_commit_at <= window
    # start, i.e. the time since it last moved is at least the window's span (Burrow's STOP
    # test; the admin API gives no commit times, so "moved" is as sampled).
    unmoved: Any
    unowned: Any  # no member is assigned the partition at the newest sample


Rule = Callable[[Window], Any]

# (status, reason, condition): the first that holds decides, as in Burrow (rewinds first, then
# any zero lag is OK, then the errors worst first, then the warning).
RULES: tuple[tuple[GroupStatus, str, Rule], ...] = (
    (GroupStatus.OK, "fewer than 2 samples: nothing to compare yet", lambda w: w.samples < 2),
    (
        GroupStatus.REWIND,
        "the committed offset moved backwards within the window and lag remains",
        lambda w: w.rewound & (w.lag_end > 0),
    ),
    (
        GroupStatus.OK,
        "lag reached 0 within the window: the consumer caught up",
        lambda w: w.lag_min <= 0,
    ),
    (
        GroupStatus.ERR,
        "no member owns the partition, its committed offset has not moved for the whole "
        "window and lag grew: the consumer stopped while producers write",
        lambda w: w.unmoved & w.unowned & (w.lag_end > w.lag_start),
    ),
    (
        GroupStatus.STOP,
        "no member owns the partition and its committed offset has not moved for the whole "
        "window, with lag: the consumer stopped",
        lambda w: w.unmoved & w.unowned,
    ),
    (
        GroupStatus.STALL,
        "a member owns the partition but the committed offset has not moved for the whole "
        "window, with lag: the consumer is stuck",
        lambda w: w.unmoved,
    ),
    (
        GroupStatus.WARN,
        "the committed offset moves but lag never fell and grew across the window: the "
        "consumer is falling behind",
        lambda w: (
            (w.committed_end > w.committed_start) & w.lag_never_fell & (w.lag_end > w.lag_start)
        ),
    ),
    (
        GroupStatus.OK,
        "lag fell within the window or did not grow: the consumer keeps up",
        lambda w: True,
    ),
)


def evaluate(window: Window) -> tuple[GroupStatus, str]:
    """(status, reason)."""
    return next((status, reason) for status, reason, rule in RULES if bool(rule(window)))


class Sample(NamedTuple):
    """One collector sample of a group's partition, for the pure evaluation."""

    at: datetime
    committed: int
    lso: int  # or the high watermark, to judge lag from the HW
    owned: bool = True  # a member is assigned the partition


def summarize(samples: Sequence[Sample], size: int) -> Window:
    """The Window of the last `size` of `samples` (any order; at least one)."""
    ordered = sorted(samples, key=lambda s: s.at)
    last_commit_at = ordered[-1].at
    for sample in reversed(ordered):
        if sample.committed != ordered[-1].committed:
            break
        last_commit_at = sample.at
    window = ordered[-size:]
    lags = [max(s.lso - s.committed, 0) for s in window]
    return Window(
        samples=len(window),
        lag_start=lags[0],
        lag_end=lags[-1],
        lag_min=min(lags),
        lag_never_fell=all(b >= a for a, b in pairwise(lags)),
        committed_start=window[0].committed,
        committed_end=window[-1].committed,
        rewound=any(b.committed < a.committed for a, b in pairwise(window)),
        unmoved=last_commit_at <= window[0].at,
        unowned=not window[-1].owned,
    )


def partition_status(samples: Sequence[Sample], size: int) -> tuple[GroupStatus, str]:
    """(status, reason) of one partition from its samples, judged over the last `size`."""
    return evaluate(summarize(samples, size))


def worst(statuses: Sequence[str]) -> GroupStatus:
    """A group's status: its worst partition's (OK without partitions)."""
    return max(map(GroupStatus, statuses), key=lambda s: s.severity, default=GroupStatus.OK)


_KEY = ["group_id", "topic", "partition"]
_READ = [*_KEY, "sampled_at", "committed_offset", "member_id", "group_state"]


def evaluate_each(window: Window) -> list[tuple[GroupStatus, str]]:
    """`evaluate` of a Window whose fields are arrays (one element per partition)."""
    n = len(window.samples)
    holds = [np.broadcast_to(np.asarray(rule(window), bool), n) for *_, rule in RULES]
    return [RULES[i][:2] for i in np.argmax(np.vstack(holds), axis=0)]


def _partition_rows(frame: pd.DataFrame, size: int) -> list[dict[str, Any]]:
    """The group_status row of each partition of `frame` (sorted by partition and time)."""
    codes = frame.groupby(_KEY, sort=False).ngroup().to_numpy()
    spans = Spans.of(codes, size)
    committed = frame["committed_offset"].to_numpy()
    at_ns = nanos(frame["sampled_at"])
    owned = frame["member_id"].notna().to_numpy()
    # A Sample's lag is its int() (summarize's); the pace keeps the column's own values.
    lag = {k: np.trunc(frame[f"lag_from_{k}"].to_numpy()).astype(np.int64) for k in ("lso", "hw")}
    windows = {k: Window(**window_fields(spans, committed, lag[k], at_ns, owned)) for k in lag}
    judged, from_hw = evaluate_each(windows["lso"]), evaluate_each(windows["hw"])
    # The first sample of the last run of one committed offset: when it last moved.
    moved = np.r_[True, committed[1:] != committed[:-1]]
    moved[spans.start] = True
    moved_at = frame["sampled_at"].where(moved)
    last_commit_at = moved_at.groupby(codes).max().tolist()
    at, lag_s = frame["sampled_at"].tolist(), frame["lag_s"].tolist()
    commits = committed.tolist()
    lso = (frame["committed_offset"] + frame["lag_from_lso"]).tolist()
    named = ("group_id", "topic", "partition", "member_id", "group_state")
    columns = {c: frame[c].tolist() for c in named}
    at_least = frame["lag_s_at_least"].tolist()
    rows = []
    for i, (first, end) in enumerate(zip(spans.window, spans.end, strict=True)):
        status, reason = judged[i]
        newest = end - 1
        pace = lag_pace(at_ns[first:end], commits[first:end], lso[first:end], lag_s[first:end])
        rows.append(
            {
                "group_id": columns["group_id"][newest],
                "topic": columns["topic"][newest],
                "partition": int(columns["partition"][newest]),
                "status": status.value,
                "severity": status.severity,
                "reason": reason,
                "status_from_hw": from_hw[i][0].value,
                "samples": int(end - first),
                "window_start": at[first],
                "window_end": at[newest],
                "committed_start": commits[first],
                "committed_end": commits[newest],
                "lso_lag_start": int(windows["lso"].lag_start[i]),
                "lso_lag_end": int(windows["lso"].lag_end[i]),
                "hw_lag_end": int(windows["hw"].lag_end[i]),
                "lag_s_start": _present(lag_s[first]),
                "lag_s_end": _present(lag_s[newest]),
                "lag_s_at_least": bool(at_least[newest]),
                "lag_s_trend": pace.lag_s_trend,
                "consume_rate": pace.consume_rate,
                "produce_rate": pace.produce_rate,
                "catch_up_s": pace.catch_up_s,
                "catching_up": pace.catching_up,
                "last_commit_at": _timestamp(last_commit_at[i]),
                "member_id": _present(columns["member_id"][newest]),
                "group_state": _present(columns["group_state"][newest]),
            }
        )
    return rows


def _group_row(group_id: str, partitions: list[dict[str, Any]]) -> dict[str, Any]:
    """A group's row: its worst partition's status (ties: the greatest label), sums of lags."""
    label = {id(p): f"{p['topic']}[{p['partition']}]" for p in partitions}
    worst_one = max(partitions, key=lambda p: (p["severity"], label[id(p)]))
    severity = worst_one["severity"]
    status = worst([worst_one["status"]])
    not_ok = sum(1 for p in partitions if p["severity"] > 0)
    reason = (
        f"all {len(partitions)} partitions OK"
        if severity == 0
        else f"worst: {label[id(worst_one)]} is {status.value} ({not_ok} of {len(partitions)} "
        "partitions not OK)"
    )
    newest = max(partitions, key=lambda p: p["window_end"])
    return {
        "group_id": group_id,
        "status": status.value,
        "severity": severity,
        "reason": reason,
        "status_from_hw": worst([p["status_from_hw"] for p in partitions]).value,
        "samples": min(p["samples"] for p in partitions),
        "window_start": min(p["window_start"] for p in partitions),
        "window_end": newest["window_end"],
        "lso_lag_start": sum(p["lso_lag_start"] for p in partitions),
        "lso_lag_end": sum(p["lso_lag_end"] for p in partitions),
        "hw_lag_end": sum(p["hw_lag_end"] for p in partitions),
        **group_pace(partitions),
        "last_commit_at": max(p["last_commit_at"] for p in partitions),
        "group_state": newest["group_state"],
    }


def group_pace(partitions: list[dict[str, Any]]) -> dict[str, Any]:
    """A group's lag in seconds and pace: its oldest uncommitted record's (the largest lag),
    rates summed, and the time until its slowest partition catches up; not catching up when
    any partition is not."""

    def largest(key: str) -> Any:
        return max((p[key] for p in partitions if p[key] is not None), default=None)

    catching = [p["catching_up"] for p in partitions]
    known = None not in catching
    return {
        "lag_s_start": largest("lag_s_start"),
        "lag_s_end": largest("lag_s_end"),
        "lag_s_at_least": any(p["lag_s_at_least"] for p in partitions),
        "lag_s_trend": largest("lag_s_trend"),
        "consume_rate": sum(p["consume_rate"] or 0.0 for p in partitions) if known else None,
        "produce_rate": sum(p["produce_rate"] or 0.0 for p in partitions) if known else None,
        "catch_up_s": _group_catch_up([p["catch_up_s"] for p in partitions])
        if known and all(catching)
        else None,
        "catching_up": all(catching) if known else None,
    }


def _group_catch_up(estimates: list[float | None]) -> float | None:
    """A catching-up group's estimate: its slowest partition's; None (keeping pace) when no
    partition has time left to catch up but one keeps pace; 0 when all are caught up."""
    if any(e for e in estimates if e is not None):
        return max(e for e in estimates if e is not None)
    return None if None in estimates else 0.0


def group_status(group_offsets: pa.Table, size: int) -> pa.Table:
    """The group_status rows from the group_offsets samples, judged over the last `size`:
    one per partition a group committed, then one per group (topic and partition null).

    Worked out on the driver: the samples are a few rows per partition and collector cycle,
    and each partition's window is `size` rows; a Spark query cost ~1.7 s per cycle."""
    frame = group_offsets.select([*_READ, "lag_from_lso", "lag_from_hw"]).to_pandas()
    # Lag in seconds where the samples were given it (lag_seconds.lagged_group_offsets).
    for column, unknown in (("lag_s", float("nan")), ("lag_s_at_least", False)):
        present = column in group_offsets.column_names
        frame[column] = group_offsets[column].to_pandas() if present else unknown
    if "share_lag" in group_offsets.column_names:
        # A share group's records not yet acknowledged, where the broker counts them
        # (docs/design.md, "Share groups"): its start offset trails what it acknowledged,
        # so lag from it would keep a finished group from OK.
        share_lag = group_offsets["share_lag"].to_pandas()
        for column in ("lag_from_lso", "lag_from_hw"):
            frame[column] = share_lag.where(share_lag.notna(), frame[column])
    frame = frame[frame["lag_from_lso"].notna()]
    if frame.empty:
        return arrow_of([], tables.GROUP_STATUS)
    frame["lag_from_hw"] = frame["lag_from_hw"].fillna(frame["lag_from_lso"])
    frame = frame.sort_values([*_KEY, "sampled_at"], kind="stable").reset_index(drop=True)
    partitions = _partition_rows(frame, size)
    by_group: dict[str, list[dict[str, Any]]] = {}
    for row in partitions:
        row["window_start"], row["window_end"] = (
            _timestamp(row["window_start"]),
            _timestamp(row["window_end"]),
        )
        by_group.setdefault(row["group_id"], []).append(row)
    groups = [_group_row(g, rows) for g, rows in by_group.items()]
    return arrow_of(partitions + groups, tables.GROUP_STATUS)


def _present(value: Any) -> Any:
    """None for pandas' missing values (NaN stands for null in an object column)."""
    return None if value is None or value != value else value


def _timestamp(value: Any) -> datetime:
    """A pandas Timestamp as a datetime."""
    found: datetime = value.to_pydatetime() if hasattr(value, "to_pydatetime") else value
    return found
