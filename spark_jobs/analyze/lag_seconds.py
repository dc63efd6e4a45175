"""Lag in seconds (docs/design.md, "Lag in seconds"): the age of the oldest record a consumer
group has not committed, and whether the group is catching up.

A record at offset o becomes readable for a read_committed consumer when the LSO passes it
(LSO > o). When that happened is read from the collectors' offsets samples: between the last
sample whose LSO was at most o and the first whose LSO was past it, the LSO is taken to have
grown at a constant rate (kafka-lag-exporter's interpolation), so the time is exact to within
the gap between those two samples, the `resolution`. Record timestamps are not used: Kafka
Streams and MirrorMaker 2 copy them forward. A record the LSO had passed already at the first
retained sample has its arrival before it: its lag is "at least" the age of that sample.

Pure functions over pandas frames, worked out on the driver like the group status: a few rows
per partition and collector cycle.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

_PARTITION = ["topic", "partition"]


@dataclass(frozen=True)
class Arrivals:
    """One partition's LSO series: sample times (ns since the epoch, ascending) and the LSO's
    running maximum at each (an LSO read lower than before is a log anomaly told elsewhere;
    records it had passed stay passed)."""

    at_ns: np.ndarray
    lso: np.ndarray

    @classmethod
    def of(cls, samples: pd.DataFrame) -> Arrivals:
        """From one partition's offsets samples (columns sampled_at, lso)."""
        ordered = samples.sort_values("sampled_at", kind="stable")
        at = nanos(ordered["sampled_at"])
        return cls(at, np.maximum.accumulate(ordered["lso"].to_numpy(dtype=np.int64)))

    def readable_at(
        self, offsets: np.ndarray, seen_by_ns: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each offset: when the LSO passed it (ns; NaN when no sample taken up to its
        `seen_by_ns` had the LSO past it), the resolution (ns) and whether that time is only
        an upper bound (the LSO had passed it at the first sample)."""
        known = np.searchsorted(self.at_ns, seen_by_ns, side="right")
        # The LSO only grows (a running maximum), so the first sample past an offset is the
        # same among all samples as among those taken by `seen_by_ns`, when it is one of them.
        first_past = np.searchsorted(self.lso, offsets, side="right")
        found = first_past < known
        before = np.clip(first_past - 1, 0, len(self.lso) - 1)
        after = np.clip(first_past, 0, len(self.lso) - 1)
        t0, t1 = self.at_ns[before].astype(float), self.at_ns[after].astype(float)
        lso0, lso1 = self.lso[before], self.lso[after]
        first = first_past == 0
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(first, 1.0, (offsets + 1 - lso0) / np.maximum(lso1 - lso0, 1))
        when = np.where(found, t0 + share * (t1 - t0), np.nan)
        when = np.where(found & first, t1, when)
        width = np.where(found & ~first, t1 - t0, np.where(found, 0.0, np.nan))
        return when, width, found & first


def arrivals(
    offsets: pd.DataFrame, wanted: Collection[tuple[str, int]] | None = None
) -> dict[tuple[str, int], Arrivals]:
    """Every partition's LSO series from the offsets samples (sampled_at, topic, partition,
    lso), or only the `wanted` partitions'. One sort of all samples, then slices: a pandas
    step per partition cost seconds a cycle at a thousand partitions."""
    present = offsets[offsets["lso"].notna()]
    frame = pd.DataFrame(
        {
            "topic": present["topic"].astype(str).to_numpy(),
            "partition": present["partition"].to_numpy(dtype=np.int64),
            "at": nanos(present["sampled_at"]) if len(present) else np.array([], np.int64),
            "lso": present["lso"].to_numpy(dtype=np.int64),
        }
    )
    if wanted is not None:
        keys = pd.MultiIndex.from_arrays([frame["topic"], frame["partition"]])
        frame = frame[keys.isin([(str(t), int(p)) for t, p in wanted])]
    if frame.empty:
        return {}
    frame = frame.sort_values([*_PARTITION, "at"], kind="stable")
    frame["lso"] = frame.groupby(_PARTITION, sort=False)["lso"].cummax()
    topics, partitions = frame["topic"].to_numpy(), frame["partition"].to_numpy()
    at, lso = frame["at"].to_numpy(), frame["lso"].to_numpy()
    starts = np.flatnonzero(
        np.r_[True, (topics[1:] != topics[:-1]) | (partitions[1:] != partitions[:-1])]
    )
    ends = np.r_[starts[1:], len(frame)]
    return {
        (str(topics[s]), int(partitions[s])): Arrivals(at[s:e], lso[s:e])
        for s, e in zip(starts, ends, strict=True)
    }


def with_lag_seconds(group_offsets: pd.DataFrame, offsets: pd.DataFrame) -> pd.DataFrame:
    """`group_offsets` (sampled_at, topic, partition, committed_offset, lag_from_lso) with
    lag_s (seconds; 0 when nothing is left to commit; NaN when unknown), lag_s_at_least (the
    oldest uncommitted record arrived before the first retained sample) and
    lag_s_resolution (seconds between the two samples the arrival lies between)."""
    series = arrivals(offsets)
    lag_s = np.full(len(group_offsets), np.nan)
    at_least = np.zeros(len(group_offsets), dtype=bool)
    resolution = np.full(len(group_offsets), np.nan)
    seen = nanos(group_offsets["sampled_at"])
    lag = group_offsets["lag_from_lso"].to_numpy(dtype=float)
    caught_up = lag <= 0
    lag_s[caught_up], resolution[caught_up] = 0.0, 0.0
    behind = group_offsets[(lag > 0) & group_offsets["committed_offset"].notna().to_numpy()]
    for (topic, partition), rows in behind.groupby(_PARTITION, sort=False):
        found = series.get((str(topic), int(partition)))
        if found is None:
            continue
        where = group_offsets.index.get_indexer(rows.index)
        when, width, first = found.readable_at(
            rows["committed_offset"].to_numpy(dtype=np.int64), seen[where]
        )
        lag_s[where] = np.maximum(seen[where] - when, 0.0) / 1e9
        resolution[where] = width / 1e9
        at_least[where] = first
    return group_offsets.assign(lag_s=lag_s, lag_s_at_least=at_least, lag_s_resolution=resolution)


def lagged_group_offsets(group_offsets: pa.Table, offsets: pa.Table) -> pa.Table:
    """The group_offsets samples with their lag in seconds (`with_lag_seconds`), as Arrow."""
    read = ["sampled_at", *_PARTITION, "committed_offset", "lag_from_lso"]
    frame = group_offsets.select(read).to_pandas()
    # Only the topics a group reads: the offsets samples span every sampled topic.
    read_topics = pc.is_in(offsets["topic"], value_set=group_offsets["topic"].unique())
    series = offsets.filter(read_topics).select(["sampled_at", *_PARTITION, "lso"]).to_pandas()
    lagged = with_lag_seconds(frame, series)
    if "share_lag" in group_offsets.column_names:
        # A share group with nothing unacknowledged has nothing late, however far its start
        # offset trails (docs/design.md, "Share groups").
        finished = (group_offsets["share_lag"].to_pandas() == 0).to_numpy()
        lagged.loc[finished, ["lag_s", "lag_s_resolution"]] = 0.0
        lagged.loc[finished, "lag_s_at_least"] = False
    table = group_offsets
    for column, kind in _LAG_COLUMNS.items():
        values = pa.array(lagged[column].to_numpy(), type=kind, from_pandas=True)
        table = table.append_column(column, values)
    return table


# The columns `with_lag_seconds` adds, as published (dgm.contracts.published.GROUP_LAG).
_LAG_COLUMNS = {
    "lag_s": pa.float64(),
    "lag_s_at_least": pa.bool_(),
    "lag_s_resolution": pa.float64(),
}


@dataclass(frozen=True)
class CatchUp:
    """A partition's (or group's) pace over a window of samples."""

    lag_s_trend: float | None  # seconds of lag gained per second (least squares); < 0 shrinking
    consume_rate: float | None  # committed records per second
    produce_rate: float | None  # records per second passing the LSO
    # Seconds until lag reaches 0 at these rates; None when not catching up, or keeping pace.
    catch_up_s: float | None
    catching_up: bool | None  # None: fewer than 2 samples


def catch_up(
    at: Sequence[pd.Timestamp], committed: Sequence[int], lso: Sequence[int], lag_s: Sequence[float]
) -> CatchUp:
    """The pace over one partition's window (oldest first): lag in records is lso - committed.
    Catching up when nothing is left to commit, when it keeps pace (it had committed
    everything at some sample of the window), or when it commits faster than records arrive:
    then the time to catch up is the lag in records over the difference of rates."""
    return pace(nanos(pd.Series(at)), committed, lso, lag_s)


def pace(
    at_ns: np.ndarray, committed: Sequence[int], lso: Sequence[int], lag_s: Sequence[float]
) -> CatchUp:
    """catch_up with the sample times as int64 nanoseconds (group_status converts every
    partition's at once)."""
    if len(at_ns) < 2:
        return CatchUp(None, None, None, None, None)
    seconds = (at_ns - at_ns[0]) / 1e9
    span = float(seconds[-1])
    if span <= 0:
        return CatchUp(None, None, None, None, None)
    consume = (committed[-1] - committed[0]) / span
    produce = (lso[-1] - lso[0]) / span
    known = [(s, lag) for s, lag in zip(seconds, lag_s, strict=True) if lag == lag]
    trend = (
        float(np.polyfit([s for s, _ in known], [lag for _, lag in known], 1)[0])
        if len({s for s, _ in known}) >= 2
        else None
    )
    left = max(lso[-1] - committed[-1], 0)
    if left == 0:
        return CatchUp(trend, consume, produce, 0.0, True)
    # Keeping pace: a consumer that committed everything at some sample of the window holds
    # only what arrived since (Burrow's OK: "lag reached 0 within the window"); an estimate
    # from its rates' small difference would be noise.
    if min(e - c for e, c in zip(lso, committed, strict=True)) <= 0:
        return CatchUp(trend, consume, produce, None, True)
    if consume > produce:
        return CatchUp(trend, consume, produce, left / (consume - produce), True)
    return CatchUp(trend, consume, produce, None, False)


def nanos(times: pd.Series) -> np.ndarray:
    """UTC times as int64 nanoseconds since the epoch."""
    converted = pd.to_datetime(times, utc=True).dt.as_unit("ns")
    return converted.astype("int64").to_numpy()  # type: ignore[no-any-return]
