"""Consumer-group status: Burrow's evaluation rules over lag from the LSO (docs/design.md,
"Consumer-group status").

Each partition a group committed is judged over its last `analysis.group_status_window`
collector samples (group_offsets). The samples of a window are summed up into a `Window`, and
each rule is written once over a Window whose fields are either plain Python values or Spark
Columns (`>`, `<=`, `&`, `|` mean the same on both; `~` does not, so no rule uses it), then
evaluated both ways: `partition_status()` on a list of samples in Python, `group_status()` as
Spark expressions for the published table. The group's status is its worst partition's.

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

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window as SparkWindow

from dgm import published as tables
from spark_jobs.analyze.frames import conform

OK, WARN, STALL, STOP, ERR, REWIND = "OK", "WARN", "STALL", "STOP", "ERR", "REWIND"
# Status -> severity, the value of the group_status alert metric; a group takes its worst.
SEVERITY: dict[str, int] = {OK: 0, WARN: 1, STALL: 2, STOP: 3, ERR: 4, REWIND: 5}


@dataclass(frozen=True)
class Window:
    """One partition's window of samples, as the rules read it. Lags are clamped at 0 (a
    read_uncommitted group can commit past the LSO). Each field is a Python value or a Column."""

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
RULES: tuple[tuple[str, str, Rule], ...] = (
    (OK, "fewer than 2 samples: nothing to compare yet", lambda w: w.samples < 2),
    (
        REWIND,
        "the committed offset moved backwards within the window and lag remains",
        lambda w: w.rewound & (w.lag_end > 0),
    ),
    (OK, "lag reached 0 within the window: the consumer caught up", lambda w: w.lag_min <= 0),
    (
        ERR,
        "no member owns the partition, its committed offset has not moved for the whole "
        "window and lag grew: the consumer stopped while producers write",
        lambda w: w.unmoved & w.unowned & (w.lag_end > w.lag_start),
    ),
    (
        STOP,
        "no member owns the partition and its committed offset has not moved for the whole "
        "window, with lag: the consumer stopped",
        lambda w: w.unmoved & w.unowned,
    ),
    (
        STALL,
        "a member owns the partition but the committed offset has not moved for the whole "
        "window, with lag: the consumer is stuck",
        lambda w: w.unmoved,
    ),
    (
        WARN,
        "the committed offset moves but lag never fell and grew across the window: the "
        "consumer is falling behind",
        lambda w: (
            (w.committed_end > w.committed_start) & w.lag_never_fell & (w.lag_end > w.lag_start)
        ),
    ),
    (OK, "lag fell within the window or did not grow: the consumer keeps up", lambda w: True),
)


def evaluate(window: Window) -> tuple[str, str]:
    """(status, reason) of a window of Python values."""
    return next((status, reason) for status, reason, rule in RULES if bool(rule(window)))


def evaluate_columns(window: Window) -> tuple[Column, Column]:
    """`evaluate` as Spark expressions over a window of Columns."""
    status: Column = F.lit(RULES[-1][0])
    reason: Column = F.lit(RULES[-1][1])
    for name, why, rule in reversed(RULES[:-1]):
        condition = rule(window)
        status = F.when(condition, F.lit(name)).otherwise(status)
        reason = F.when(condition, F.lit(why)).otherwise(reason)
    return status, reason


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


def partition_status(samples: Sequence[Sample], size: int) -> tuple[str, str]:
    """(status, reason) of one partition from its samples, judged over the last `size`."""
    return evaluate(summarize(samples, size))


def worst(statuses: Sequence[str]) -> str:
    """A group's status: its worst partition's (OK without partitions)."""
    return max(statuses, key=SEVERITY.__getitem__, default=OK)


_KEY = ("group_id", "topic", "partition")
_LAGS = {"lso": "lag_from_lso", "hw": "lag_from_hw"}


def _window_columns(lag: str) -> Window:
    return Window(
        samples=F.col("samples"),
        lag_start=F.col(f"{lag}_start"),
        lag_end=F.col(f"{lag}_end"),
        lag_min=F.col(f"{lag}_min"),
        lag_never_fell=~F.col(f"{lag}_fell"),
        committed_start=F.col("committed_start"),
        committed_end=F.col("committed_end"),
        rewound=F.col("rewound"),
        unmoved=F.col("last_commit_at") <= F.col("window_start"),
        unowned=F.col("member_id").isNull(),
    )


def _windows(group_offsets: DataFrame, size: int) -> DataFrame:
    """One row per (group, topic, partition): its last `size` samples summed up."""
    history = SparkWindow.partitionBy(*_KEY).orderBy("sampled_at")
    committed = F.col("committed_offset")
    before = F.lag(committed).over(history)
    rows = (
        group_offsets.where(F.col("lag_from_lso").isNotNull())
        .withColumn("_moved", F.when(before.isNull() | (before != committed), F.col("sampled_at")))
        .withColumn("last_commit_at", F.max("_moved").over(SparkWindow.partitionBy(*_KEY)))
        .withColumn(
            "_newest",
            F.row_number().over(SparkWindow.partitionBy(*_KEY).orderBy(F.desc("sampled_at"))),
        )
        .where(F.col("_newest") <= size)
        .withColumn("_rewound", committed < F.lag(committed).over(history))
    )
    aggregates = []
    for lag, column in _LAGS.items():
        value = F.greatest(F.coalesce(F.col(column), F.col("lag_from_lso")), F.lit(0))
        rows = rows.withColumn(lag, value).withColumn(
            f"_{lag}_fell", F.col(lag) < F.lag(lag).over(history)
        )
        aggregates += [
            F.min_by(lag, "sampled_at").alias(f"{lag}_start"),
            F.max_by(lag, "sampled_at").alias(f"{lag}_end"),
            F.min(lag).alias(f"{lag}_min"),
            F.coalesce(F.max(f"_{lag}_fell"), F.lit(False)).alias(f"{lag}_fell"),
        ]
    return rows.groupBy(*_KEY).agg(
        F.count(F.lit(1)).alias("samples"),
        F.min("sampled_at").alias("window_start"),
        F.max("sampled_at").alias("window_end"),
        F.min_by(committed, "sampled_at").alias("committed_start"),
        F.max_by(committed, "sampled_at").alias("committed_end"),
        F.coalesce(F.max("_rewound"), F.lit(False)).alias("rewound"),
        F.max("last_commit_at").alias("last_commit_at"),
        F.max_by("member_id", "sampled_at").alias("member_id"),
        F.max_by("group_state", "sampled_at").alias("group_state"),
        *aggregates,
    )


def _status_of(severity: Column) -> Column:
    result: Column = F.lit(OK)
    for name, value in SEVERITY.items():
        result = F.when(severity == F.lit(value), F.lit(name)).otherwise(result)
    return result


def _severity_of(status: Column) -> Column:
    result: Column = F.lit(0)
    for name, value in SEVERITY.items():
        result = F.when(status == F.lit(name), F.lit(value)).otherwise(result)
    return result


def _group_rows(partitions: DataFrame) -> DataFrame:
    """Per group: the worst partition's status, and which partition it is."""
    label = F.format_string("%s[%d]", F.col("topic"), F.col("partition"))
    rows = partitions.groupBy("group_id").agg(
        F.max(F.struct("severity", label.alias("label"))).alias("_worst"),
        F.max(_severity_of(F.col("status_from_hw"))).alias("_hw_severity"),
        F.count(F.lit(1)).alias("_partitions"),
        F.count(F.when(F.col("severity") > 0, 1)).alias("_not_ok"),
        F.min("samples").alias("samples"),
        F.min("window_start").alias("window_start"),
        F.max("window_end").alias("window_end"),
        F.sum("lso_lag_start").alias("lso_lag_start"),
        F.sum("lso_lag_end").alias("lso_lag_end"),
        F.sum("hw_lag_end").alias("hw_lag_end"),
        F.max("last_commit_at").alias("last_commit_at"),
        F.max_by("group_state", "window_end").alias("group_state"),
    )
    severity = F.col("_worst.severity")
    reason = F.when(
        severity == 0, F.format_string("all %d partitions OK", F.col("_partitions"))
    ).otherwise(
        F.format_string(
            "worst: %s is %s (%d of %d partitions not OK)",
            F.col("_worst.label"),
            _status_of(severity),
            F.col("_not_ok"),
            F.col("_partitions"),
        )
    )
    return rows.select(
        "*",
        severity.alias("severity"),
        _status_of(severity).alias("status"),
        reason.alias("reason"),
        _status_of(F.col("_hw_severity")).alias("status_from_hw"),
    )


def group_status(group_offsets: DataFrame, size: int) -> DataFrame:
    """The group_status table from the group_offsets samples, judged over the last `size`."""
    windows = _windows(group_offsets, size)
    status, reason = evaluate_columns(_window_columns("lso"))
    from_hw, _ = evaluate_columns(_window_columns("hw"))
    partitions = windows.select(
        "*",
        status.alias("status"),
        _severity_of(status).alias("severity"),
        reason.alias("reason"),
        from_hw.alias("status_from_hw"),
        *(
            F.col(f"{lag}_{end}").alias(f"{lag}_lag_{end}")
            for lag in _LAGS
            for end in ("start", "end")
        ),
    )
    table = tables.GROUP_STATUS
    return conform(partitions, table).unionByName(conform(_group_rows(partitions), table))
