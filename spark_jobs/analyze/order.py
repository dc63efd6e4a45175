"""Records out of order (docs/design.md, "Order, beside the delivery semantic"), beside the
verdict and never part of it.

A **stream** is a producer session in a source partition (its position: dgm-seq), or the
copies of one source partition in a sink partition (its position: the dgm-src offset, else the
offset of the one source record holding the copy's id, lineage.py). A
committed record is out of order when its position is lower than that of a record of its
stream at a lower offset: the record is **behind**. The anomaly is `out of order` for a
producer session, `sink out of order` for a sink.

A stream reduces to its **mark**: the highest position read so far, the offset of the first
record holding it, and the highest offset read. An audit reads each partition's offsets in
increasing ranges, so a cycle's new records lie above their streams' marks and are judged
against the marks alone (`judge`); the rebuild judges every record in one shuffle by stream
(passes.streams, `order_rows`). Records that do not lie above their mark (`above` says so)
are judged again with every record of their streams.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from dgm.contracts.clusters import EXTERNAL_PREFIX, SEPARATOR
from dgm.contracts.vocabulary import OrderAnomaly
from spark_jobs.analyze.output import NO_TIME

# What a stream's records carry in (passes.stream_records selects them, with `committed`).
COLUMNS = ("anomaly", "topic", "partition", "offset", "timestamp", "message_id", "stream",
           "position")  # fmt: skip
STREAM = ["anomaly", "topic", "partition", "stream"]
# What comes out: `row` is "behind" (a record out of order, with the highest position before
# it and the offset of the first record holding that) or "mark" (a stream's mark: `position`
# the highest, `preceded_at` the first offset holding it, `offset` the highest offset read).
BEHIND, MARK = "behind", "mark"
ROWS = pa.schema(
    [
        ("row", pa.string()),
        ("anomaly", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("stream", pa.string()),
        ("offset", pa.int64()),
        ("timestamp_us", pa.int64()),
        ("message_id", pa.string()),
        ("position", pa.int64()),
        ("preceded_by", pa.int64()),
        ("preceded_at", pa.int64()),
    ]
)
MARK_COLUMNS = [*STREAM, "offset", "position", "preceded_at"]


def kafka_topics(topics: Iterable[str]) -> list[str]:
    """The Kafka topics among sink names: an external sink's is 'external:<pipeline>:<table>'
    (no Kafka topic name holds a colon), and its rows' order is the table's, not a log's."""
    return [t for t in topics if not t.startswith(EXTERNAL_PREFIX)]


def source_topic_of(stream: str) -> str:
    """The source topic a sink stream names: plain as dgm-src names it (lineage is not
    qualified with a cluster, docs/design.md "Several clusters"), qualified when the id join
    (lineage.py) found it."""
    return stream.rsplit("/", 1)[0]


def plain(topic: str) -> str:
    """A topic's name on its cluster: what follows a qualified name's '<cluster>/' (a Kafka
    topic name holds no '/')."""
    return topic.rsplit(SEPARATOR, 1)[-1]


_INTS = ("partition", "offset", "position", "preceded_at")


def no_marks() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="int64" if c in _INTS else object)
                         for c in MARK_COLUMNS})  # fmt: skip


def records_of(batch: pa.Table) -> pd.DataFrame:
    """COLUMNS of `batch` as pandas, the timestamp as micros (NO_TIME when none)."""
    stamps = batch.column("timestamp").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    frame = pd.DataFrame({c: batch.column(c).to_pandas() for c in COLUMNS if c != "timestamp"})
    frame["timestamp_us"] = stamps.fill_null(NO_TIME).to_pandas()
    return frame.astype({"partition": "int64", "offset": "int64", "position": "int64"})


def above(records: pd.DataFrame, marks: pd.DataFrame) -> bool:
    """Whether every record lies above its stream's mark (the highest offset read)."""
    if records.empty or marks.empty:
        return True
    reach = marks.groupby(STREAM)["offset"].max().rename("reach").reset_index()
    joined = records.merge(reach, on=STREAM)
    return bool((joined["offset"] > joined["reach"]).all())


@dataclass(frozen=True)
class Judged:
    """What `judged` finds, as positions into the rows it was given: `behind` (the rows out
    of order) with the highest position before each and the offset of the first row holding
    it; and per stream (in the order of `streams`' codes) one row of it, its highest
    position, the first offset holding it and its highest offset read."""

    behind: np.ndarray
    preceded_by: np.ndarray
    preceded_at: np.ndarray
    stream_row: np.ndarray
    position: np.ndarray
    first_at: np.ndarray
    reach: np.ndarray


def judged(
    streams: np.ndarray,
    offsets: np.ndarray,
    positions: np.ndarray,
    is_mark: np.ndarray,
    reach: np.ndarray,
) -> Judged:
    """The rule on integer arrays, one element per row: the stream's code, the offset (a
    mark's: its preceded_at), the position, whether the row is a kept mark (it stands first
    in its stream) and the highest offset the row stands for. Numpy throughout: grouping the
    streams' strings with pandas took most of the rebuild's order pass."""
    rows = np.lexsort((offsets, ~is_mark, streams))
    code, offset, position = streams[rows], offsets[rows], positions[rows]
    n = len(rows)
    starts = np.flatnonzero(np.r_[True, code[1:] != code[:-1]]) if n else np.zeros(0, np.int64)
    first = np.zeros(n, bool)
    first[starts] = True
    group = np.cumsum(first) - 1
    # The highest position up to each row: a running max restarted at each stream.
    highest = pd.Series(position).groupby(group).cummax().to_numpy()
    before = np.r_[np.int64(0), highest[:-1]] if n else highest
    has_before = ~first
    # The first row holding the highest position so far: where the position first rose.
    rose = first | (position > before)
    held_at = offset[np.maximum.accumulate(np.where(rose, np.arange(n), 0))]
    preceded_at = np.r_[np.int64(0), held_at[:-1]] if n else held_at
    out = has_before & ~is_mark[rows] & (position < before)
    ends = np.r_[starts[1:], n] - 1 if n else starts
    return Judged(
        behind=rows[out],
        preceded_by=before[out],
        preceded_at=preceded_at[out],
        stream_row=rows[starts],
        position=highest[ends],
        first_at=held_at[ends],
        reach=np.maximum.reduceat(reach[rows], starts) if n else reach,
    )


def judge(records: pd.DataFrame, marks: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(behind, marks): the records (records_of) behind a higher position of their stream,
    judged after the streams' `marks`, and the marks with them. Every record lies above its
    stream's mark (`above`)."""
    if records.empty:
        return records.iloc[0:0].assign(preceded_by=0, preceded_at=0), marks
    # A mark stands first in its stream as one record holding its highest position.
    kept = marks.assign(offset=marks["preceded_at"], timestamp_us=NO_TIME, message_id=None)
    rows = pd.concat([kept, records], ignore_index=True)
    found = judged(
        rows.groupby(STREAM, sort=False).ngroup().to_numpy(),
        rows["offset"].to_numpy(dtype="int64"),
        rows["position"].to_numpy(dtype="int64"),
        np.arange(len(rows)) < len(kept),
        np.r_[marks["offset"].to_numpy(dtype="int64"), records["offset"].to_numpy(dtype="int64")],
    )
    behind = rows.iloc[found.behind][[*STREAM, "offset", "timestamp_us", "message_id",
                                      "position"]]  # fmt: skip
    behind = behind.assign(preceded_by=found.preceded_by, preceded_at=found.preceded_at)
    marked = rows.iloc[found.stream_row][STREAM].assign(
        offset=found.reach, position=found.position, preceded_at=found.first_at
    )
    marked = marked.astype({c: "int64" for c in _INTS})
    return behind.reset_index(drop=True), marked[MARK_COLUMNS].reset_index(drop=True)


def order_rows(batch: pa.Table) -> pa.Table:
    """ROWS of one partition of records shuffled by stream (every record of a stream in it).
    The rebuild's millions of rows stay in Arrow: the streams as integer codes, the strings
    taken only for the rows that come out."""
    codes = pd.DataFrame(
        {c: pc.dictionary_encode(batch[c]).combine_chunks().indices.to_numpy() for c in STREAM}
    )
    offsets = batch["offset"].to_numpy().astype("int64")
    found = judged(
        codes.groupby(STREAM, sort=False).ngroup().to_numpy(),
        offsets,
        batch["position"].to_numpy().astype("int64"),
        np.zeros(batch.num_rows, bool),
        offsets,
    )
    stamps = batch["timestamp"].cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    behind, marks = batch.take(found.behind), batch.take(found.stream_row)
    none = pa.nulls(len(marks), pa.int64())
    return pa.concat_tables(
        [
            _rows(BEHIND, behind, {
                "offset": behind["offset"], "timestamp_us": stamps.take(found.behind),
                "message_id": behind["message_id"], "position": behind["position"],
                "preceded_by": found.preceded_by, "preceded_at": found.preceded_at,
            }),
            _rows(MARK, marks, {
                "offset": found.reach, "timestamp_us": none, "position": found.position,
                "preceded_by": none, "preceded_at": found.first_at,
            }),
        ]
    )  # fmt: skip


def _rows(kind: str, streams: pa.Table, values: Mapping[str, Any]) -> pa.Table:
    """ROWS of `kind`: the STREAM columns of `streams`, the rest from `values` (null when
    absent)."""
    n = streams.num_rows
    columns = {"row": pa.array([kind] * n, pa.string()), **{c: streams[c] for c in STREAM}}
    columns.update(values)
    return pa.Table.from_arrays(
        [pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(n, f.type)
         for f in ROWS],
        schema=ROWS,
    )  # fmt: skip


def split(rows: pa.Table) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(behind, marks) of ROWS, as judge gives them."""
    frame = rows.to_pandas()
    behind = frame[frame["row"] == BEHIND].drop(columns=["row"])
    behind = behind.assign(timestamp_us=behind["timestamp_us"].fillna(NO_TIME).astype("int64"))
    marks = frame[frame["row"] == MARK][MARK_COLUMNS].astype({c: "int64" for c in _INTS})
    return behind.reset_index(drop=True), marks.reset_index(drop=True)


def per_pipeline(
    behind: pd.DataFrame,
    sources: Mapping[str, tuple[str, ...]],
    sinks: Mapping[str, tuple[str, ...]],
    source_topics: Mapping[str, tuple[str, ...]],
) -> pd.DataFrame:
    """`behind` once per pipeline it counts against (column `pipeline`): a producer
    session's record for every pipeline reading its topic, a sink's for the pipelines
    writing that sink from the source topic its stream names (by its plain name: dgm-src
    does not say the cluster, the id join does)."""
    parts = []
    producer = behind[behind["anomaly"] == OrderAnomaly.OUT_OF_ORDER.value]
    for topic, names in sources.items():
        mine = producer[producer["topic"] == topic]
        parts += [mine.assign(pipeline=name) for name in names if not mine.empty]
    sink = behind[behind["anomaly"] == OrderAnomaly.SINK_OUT_OF_ORDER.value]
    if not sink.empty:
        read_from = sink["stream"].map(lambda stream: plain(source_topic_of(stream)))
        for topic, names in sinks.items():
            for name in names:
                reads = [plain(t) for t in source_topics.get(name, ())]
                mine = sink[(sink["topic"] == topic) & read_from.isin(reads)]
                if not mine.empty:
                    parts.append(mine.assign(pipeline=name))
    if not parts:
        return behind.iloc[0:0].assign(pipeline=pd.Series(dtype=object))
    return pd.concat(parts, ignore_index=True)
