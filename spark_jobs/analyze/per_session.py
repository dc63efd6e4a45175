"""Sequence gaps of source producer sessions, worked out where all of a session's records on
a partition are (the engine shuffles source records by topic, partition and producer).

The rule is `loss.gaps`'s docstring: a run of dgm-seq missing from a session's records
(aborted ones count as present; sessions start at 0 unless the partition is not held from
offset 0), lost once the record after it is older than the grace cutoff, for every pipeline
reading the topic.
"""

from __future__ import annotations

from collections.abc import Collection

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.analyze.loss import SEQUENCE_GAP
from spark_jobs.analyze.output import NO_TIME, rows_of
from spark_jobs.analyze.per_id import Context, counted, per_pipeline

# The columns a session's records need here (the engine ships no others).
COLUMNS = ("topic", "partition", "producer", "seq", "timestamp")


def session_frame(batch: pa.Table) -> pd.DataFrame:
    """Records as pandas: `ts` in micros (NO_TIME when null) and `has_ts`."""
    stamp = batch.column("timestamp").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    frame = pd.DataFrame({name: batch.column(name).to_pandas() for name in COLUMNS[:-1]})
    return frame.assign(
        has_ts=pc.is_valid(stamp).to_pandas(), ts=pc.fill_null(stamp, NO_TIME).to_pandas()
    )


def gaps(frame: pd.DataFrame, partial: Collection[tuple[str, int]], cutoff_us: int) -> pd.DataFrame:
    """(topic, partition, producer, seq = first missing, missing, ts, has_ts) per gap whose
    next record (`ts`: the earliest holding the sequence after the gap) is before the cutoff."""
    keys = ["topic", "partition", "producer"]
    stamped = frame[frame["producer"].notna() & frame["seq"].notna()]
    stamped = stamped.assign(seq=stamped["seq"].astype("int64"))
    # The sequence after a gap may sit at several offsets (a retried send): its earliest.
    timed = stamped.assign(ts=stamped["ts"].where(stamped["has_ts"]))
    after = timed.groupby([*keys, "seq"])["ts"].min().reset_index()
    previous = after.groupby(keys)["seq"].shift(1).fillna(-1).astype("int64")
    found = after.assign(first=previous + 1, missing=after["seq"] - previous - 1)
    found = found[found["missing"] > 0]
    if partial:
        held_late = pd.MultiIndex.from_frame(found[["topic", "partition"]]).isin(list(partial))
        found = found[~(held_late & (found["first"] == 0))]
    found = found[found["ts"].notna() & (found["ts"] < cutoff_us)]
    return pd.DataFrame(
        {
            "topic": found["topic"],
            "partition": found["partition"],
            "producer": found["producer"],
            "seq": found["first"],
            "missing": found["missing"],
            "ts": found["ts"].fillna(NO_TIME).astype("int64"),
            "has_ts": True,
        }
    )


def per_session_rows(
    batch: pa.Table, context: Context, partial: Collection[tuple[str, int]]
) -> pa.Table:
    """The lost rows (cause 'sequence gap') and their counts per pipeline window of one
    partition of session-shuffled source records (output.SCHEMA)."""
    found = per_pipeline(gaps(session_frame(batch), partial, context.cutoff_us), context.sources)
    lost = counted(found, context.window_us, lost=found["missing"])
    return rows_of(
        batch,
        lost=found.drop(columns=["ts", "has_ts"]).assign(cause=SEQUENCE_GAP),
        pipeline=lost.assign(total=False),
    )
