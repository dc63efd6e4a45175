"""Sequence gaps of source producer sessions, kept as runs so new records update them alone.

The rule is the loss module's docstring's: a run of dgm-seq missing from a session's records
(aborted ones count as present; sessions start at 0 unless the partition is not held from
offset 0), lost once the record after it is older than the grace cutoff, for every pipeline
reading the topic.

A session's records reduce to its runs: the maximal ranges of consecutive seq it holds,
each with the earliest timestamp of a record holding the run's first seq. The gaps are what
lies between runs (and before the first, from 0), and the runs of old and new records
together are the runs of old runs and new records together: a cycle merges its new records
into the kept runs (a few per session) without reading the old records again. The rebuild
works the runs out in one shuffle of source records by session (passes.streams).
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from dgm.contracts.vocabulary import LossCause
from spark_jobs.analyze.context import Context
from spark_jobs.analyze.id_frame import per_pipeline
from spark_jobs.analyze.output import NO_TIME
from spark_jobs.analyze.per_id_counts import counted

# The columns a session's records need here (passes.sessions_of gives no others).
COLUMNS = ("topic", "partition", "producer", "seq", "timestamp")
SESSION = ["topic", "partition", "producer"]
# start_ts: the earliest timestamp (micros) of a record holding `start`; null when none has one
RUNS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("producer", pa.string()),
        ("start", pa.int64()),
        ("end", pa.int64()),
        ("start_ts", pa.int64()),
    ]
)


def intervals_of(batch: pa.Table) -> pd.DataFrame:
    """Each stamped record of `batch` (COLUMNS) as a one-seq run."""
    stamp = batch.column("timestamp").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    frame = pd.DataFrame({name: batch.column(name).to_pandas() for name in SESSION})
    seq = batch.column("seq").to_pandas()
    frame = frame.assign(start=seq, end=seq, start_ts=stamp.to_pandas())
    return frame[frame["producer"].notna() & frame["start"].notna()]


def runs(intervals: pd.DataFrame) -> pd.DataFrame:
    """Runs (RUNS' columns, sorted by session and start) of `intervals`: runs or one-seq
    records, overlapping or adjacent ranges of a session merged."""
    if intervals.empty:
        return RUNS.empty_table().to_pandas()
    typed = intervals.astype({"start": "int64", "end": "int64", "start_ts": "float64"})
    first = (
        typed.groupby([*SESSION, "start"], sort=True)
        .agg(end=("end", "max"), start_ts=("start_ts", "min"))
        .reset_index()
    )
    reach = first.groupby(SESSION)["end"].cummax()
    reached = reach.groupby([first[k] for k in SESSION]).shift(1)
    begins = (reached.isna() | (first["start"] > reached + 1)).to_numpy()
    run = np.cumsum(begins)
    heads = first[begins].reset_index(drop=True)
    heads["end"] = first.groupby(run)["end"].max().to_numpy()
    return heads


def runs_rows(batch: pa.Table) -> pa.Table:
    """The runs of the source records (COLUMNS) of one partition, as Arrow (RUNS)."""
    # Sessions grouped by integer codes of topic and producer: grouping on the strings
    # themselves took most of the time.
    topics = batch.column("topic").combine_chunks().dictionary_encode()
    producers = batch.column("producer").combine_chunks().dictionary_encode()
    coded = batch.set_column(batch.schema.get_field_index("topic"), "topic", topics.indices)
    coded = coded.set_column(
        batch.schema.get_field_index("producer"), "producer", producers.indices
    )
    found = runs(intervals_of(coded))
    for name, codes in (("topic", topics), ("producer", producers)):
        names = np.array(codes.dictionary.to_pylist(), dtype=object)
        found[name] = names[found[name].to_numpy(dtype="int64")]
    return runs_table(found)


def runs_table(found: pd.DataFrame) -> pa.Table:
    stamps = found["start_ts"].astype("float64")
    return pa.Table.from_arrays(
        [
            pa.array(found["topic"].astype(object), pa.string()),
            pa.array(found["partition"].astype("int64"), pa.int64()).cast(pa.int32()),
            pa.array(found["producer"].astype(object), pa.string()),
            pa.array(found["start"].astype("int64")),
            pa.array(found["end"].astype("int64")),
            pa.array(stamps.fillna(0).astype("int64"), mask=stamps.isna().to_numpy()),
        ],
        schema=RUNS,
    )


def runs_frame(table: pa.Table) -> pd.DataFrame:
    """RUNS as pandas, start_ts float micros (NaN when none): exact, micros are < 2**53."""
    frame = table.to_pandas()
    return frame.assign(start_ts=pc.cast(table["start_ts"], pa.float64()).to_pandas())


def gaps(found: pd.DataFrame, partial: Collection[tuple[str, int]], cutoff_us: int) -> pd.DataFrame:
    """(topic, partition, producer, seq = first missing, missing, ts, has_ts) per gap between
    `found` runs whose next record (`ts`: the earliest holding the run's start) is before the
    cutoff."""
    ordered = found.sort_values([*SESSION, "start"])
    previous = ordered.groupby(SESSION)["end"].shift(1).fillna(-1).astype("int64")
    between = ordered.assign(first=previous + 1, missing=ordered["start"] - previous - 1)
    between = between[between["missing"] > 0]
    if partial:
        held_late = pd.MultiIndex.from_frame(between[["topic", "partition"]]).isin(list(partial))
        between = between[~(held_late & (between["first"] == 0))]
    between = between[between["start_ts"].notna() & (between["start_ts"] < cutoff_us)]
    return pd.DataFrame(
        {
            "topic": between["topic"],
            "partition": between["partition"],
            "producer": between["producer"],
            "seq": between["first"],
            "missing": between["missing"],
            "ts": between["start_ts"].fillna(NO_TIME).astype("int64"),
            "has_ts": True,
        }
    )


def gap_rows(
    found: pd.DataFrame, context: Context, partial: Collection[tuple[str, int]]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(lost rows with cause 'sequence gap', their counts per pipeline window) of the runs."""
    missing = per_pipeline(gaps(found, partial, context.cutoff_us), context.sources)
    counts = counted(missing, context.window_us, lost=missing["missing"])
    lost = missing.drop(columns=["ts", "has_ts"]).assign(cause=LossCause.SEQUENCE_GAP.value)
    return lost, counts.assign(total=False)
