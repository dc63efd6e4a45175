"""When each audited record became readable: its fingerprint's `arrived_at` and
`arrival_resolution_us` (docs/design.md, "Lag in seconds").

A record at offset o became readable to a read_committed consumer when the LSO passed it
(LSO > o). Between the last offsets sample whose LSO was at most o and the first whose LSO
was past it, the LSO is taken to have grown at a constant rate: exactly
spark_jobs.analyze.lag_seconds.Arrivals.readable_at, over the LSO's running maximum per
partition (an LSO read lower than before is a log anomaly; what it had passed stays passed).
Such a pair of consecutive samples is a **segment**: lso0 <= o < lso1, from t0 to t1. A record
no segment holds has no arrival: the LSO had passed it at the first sample kept, or no sample
has passed it yet.

The segments are built on the driver from the samples the audited ranges need
(offsets_samples.py); a chunk's few are sent whole to every task and joined by offset bucket,
like aborted_marking.mark_aborted_spans, so the fingerprints are not shuffled.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dgm.contracts.samples import Key
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.schemas import FINGERPRINT

SEGMENTS = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("lso0", pa.int64()),
        pa.field("lso1", pa.int64()),
        # Sample times, µs since the epoch.
        pa.field("t0_us", pa.int64()),
        pa.field("t1_us", pa.int64()),
    ]
)
# Offsets per bucket of the range join: a segment is listed once per bucket it covers, a
# record looks up its own bucket only.
ARRIVAL_BUCKET = 4096


def segments(samples: pa.Table) -> pa.Table:
    """The SEGMENTS of `samples` (sampled_at, topic, partition, lso; any order): per
    partition, each pair of consecutive samples whose running-maximum LSO grew."""
    at_us = pc.cast(samples["sampled_at"], pa.timestamp("us", tz="UTC")).cast(pa.int64())
    table = pa.table(
        {"topic": samples["topic"], "partition": samples["partition"], "t": at_us,
         "lso": samples["lso"]}
    )  # fmt: skip
    ordered = table.sort_by([(c, "ascending") for c in table.column_names]).to_pandas()
    top = ordered.groupby(["topic", "partition"], sort=False)["lso"].cummax().to_numpy()
    topic, partition = ordered["topic"].to_numpy(), ordered["partition"].to_numpy()
    same = (topic[1:] == topic[:-1]) & (partition[1:] == partition[:-1])
    before = np.flatnonzero(same & (top[1:] > top[:-1]))
    after, t = before + 1, ordered["t"].to_numpy()
    columns = [topic[after], partition[after], top[before], top[after], t[before], t[after]]
    return pa.table(
        [pa.array(c, f.type) for c, f in zip(columns, SEGMENTS, strict=True)], schema=SEGMENTS
    )


def needed(found: pa.Table, ranges: Sequence[OffsetRange]) -> pa.Table:
    """The segments of `found` (SEGMENTS) that hold an offset of `ranges`: what a read of
    them joins, each once."""
    spans: dict[Key, tuple[int, int]] = {}
    for r in ranges:
        low, high = spans.get(r.key, (r.start, r.end))
        spans[r.key] = min(low, r.start), max(high, r.end)
    bounds = pa.table(
        {
            "topic": pa.array([t for t, _ in spans], pa.string()),
            "partition": pa.array([p for _, p in spans], pa.int32()),
            "_start": pa.array([s for s, _ in spans.values()], pa.int64()),
            "_end": pa.array([e for _, e in spans.values()], pa.int64()),
        }
    )
    joined = found.join(bounds, ["topic", "partition"], join_type="inner")
    inside = pc.and_(
        pc.greater(joined["lso1"], joined["_start"]), pc.less(joined["lso0"], joined["_end"])
    )
    return joined.filter(inside).select(SEGMENTS.names)


def with_arrivals(fingerprints: DataFrame, segments: DataFrame) -> DataFrame:
    """`fingerprints` with arrived_at and arrival_resolution_us from the segment of
    `segments` (SEGMENTS rows; a partition's never overlap) holding their offset; null where
    none does. The segments are sent whole to every task: a hash join on (topic, partition,
    offset bucket), then the offset tested against the segment."""
    listed = segments.select(
        F.col("topic").alias("_topic"),
        F.col("partition").alias("_partition"),
        F.explode(
            F.sequence(
                F.floor(F.col("lso0") / ARRIVAL_BUCKET),
                F.floor((F.col("lso1") - 1) / ARRIVAL_BUCKET),
            )
        ).alias("_segment_bucket"),
        *(F.col(c).alias(f"_{c}") for c in ("lso0", "lso1", "t0_us", "t1_us")),
    )
    joined = fingerprints.withColumn("_bucket", F.floor(F.col("offset") / ARRIVAL_BUCKET)).join(
        F.broadcast(listed),
        (F.col("topic") == F.col("_topic"))
        & (F.col("partition") == F.col("_partition"))
        & (F.col("_bucket") == F.col("_segment_bucket"))
        & (F.col("offset") >= F.col("_lso0"))
        & (F.col("offset") < F.col("_lso1")),
        "left",
    )
    width = F.col("_t1_us") - F.col("_t0_us")
    # In double: (offset - lso0) x width may not fit in a long (a day-long gap, a big burst).
    share = (F.col("offset") + 1 - F.col("_lso0")) / (F.col("_lso1") - F.col("_lso0"))
    at = F.timestamp_micros(F.round(F.col("_t0_us") + share * width).cast("long"))
    filled = {"arrived_at": at, "arrival_resolution_us": width}
    return joined.select(
        *(filled[f.name].alias(f.name) if f.name in filled else f.name for f in FINGERPRINT)
    )
