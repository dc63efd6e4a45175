"""The rows the per-partition passes (per_id, per_session) give the engine: one Arrow schema
for every kind, so one `mapInArrow` per pass and one persisted frame per cycle.

`kind` says what a row is: a `duplicates`, `lost` or `late` row (the published row, plus the keys
the engine needs), or partial counts per `pipeline`, `topic` or `partition` window that
the engine sums per key. Times travel as micros (int64): NO_TIME in pandas, null here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

NO_TIME = np.iinfo(np.int64).min  # a row without a timestamp; sorts first, like Spark's nulls

# Partial counts per topic (or topic partition) window, and per pipeline window.
TOPIC_COUNTS = (
    "records",
    "distinct_ids",
    "identified",
    "unidentified",
    "aborted",
    "duplicate_copies",
    "out_of_order",
)
PIPELINE_COUNTS = (
    "records_checked",
    "duplicate_copies",
    "upstream_duplicates",
    "lost",
    "aborted_reads",
    "sink_records",
    "unidentified",
    "beyond_retention",
    "late_records",
    "filtered",
    "filter_undecided",
    "torn_commits",
    "producer_out_of_order",
    "sink_out_of_order",
)
# Per pipeline, window and latency bucket (kind latency.KIND, the bucket in `partition`):
# checked records whose first sink copy's arrival fell in the bucket.
LATENCY_COUNTS = ("delivered",)
COUNTS = tuple(dict.fromkeys((*TOPIC_COUNTS, *PIPELINE_COUNTS, *LATENCY_COUNTS)))
SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("pipeline", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("window_us", pa.int64()),
        ("total", pa.bool_()),
        ("message_id", pa.string()),
        ("copies", pa.int64()),
        ("copy_number", pa.int64()),
        ("is_extra_copy", pa.bool_()),
        ("offset", pa.int64()),
        ("timestamp_us", pa.int64()),
        ("key", pa.string()),
        ("producer", pa.string()),
        ("seq", pa.int64()),
        ("lineage", pa.string()),
        ("cause", pa.string()),
        ("missing", pa.int64()),
        *((name, pa.int64()) for name in COUNTS),
        ("first_checked_us", pa.int64()),
        ("last_checked_us", pa.int64()),
        # a torn commit's first aborted sink copy, 'topic/partition/offset'
        ("aborted_copy", pa.string()),
        # a duplicate's source record by the id join (per_id.joined_sources)
        ("source_topic", pa.string()),
        ("source_partition", pa.int64()),
        ("source_offset", pa.int64()),
        # a late record's (late.py): its delay, how it was measured, its first sink copy
        ("delay_us", pa.int64()),
        ("measured_by", pa.string()),
        ("first_copy", pa.string()),
    ]
)
# Taken from the fingerprints as they are (exact types), not rebuilt from pandas.
_FROM_RECORD = ("message_id", "offset", "key", "producer", "seq", "lineage")
_TIMES = ("window_us", "first_checked_us", "last_checked_us")


def _integers(values: pd.Series, none: float | None = None) -> pa.Array:
    """Whole numbers (counts, offsets, micros: all exact in float64) with nulls for NaN and
    for `none`."""
    numbers = pd.to_numeric(values, errors="coerce").astype("float64")
    absent = numbers.isna() if none is None else numbers.isna() | (numbers == none)
    return pa.array(numbers.fillna(0).to_numpy().astype("int64"), mask=absent.to_numpy())


def _column(name: str, rows: pd.DataFrame, records: pa.Table | None) -> pa.Array:
    kind = SCHEMA.field(name).type
    n = len(rows)
    if records is not None and name in _FROM_RECORD:
        return records.column(name).combine_chunks().cast(kind)
    if records is not None and name == "timestamp_us":
        stamps = records.column("timestamp").cast(pa.timestamp("us", tz="UTC"))
        return stamps.combine_chunks().cast(pa.int64())
    if name not in rows.columns:
        return pa.nulls(n, kind)
    values = rows[name]
    if name in _TIMES:
        return _integers(values, float(NO_TIME))
    if pa.types.is_integer(kind):
        return _integers(values).cast(kind)
    return pa.array(values.astype(object).where(values.notna(), None).tolist(), kind)


def rows_of(records: pa.Table, **kinds: pd.DataFrame) -> pa.Table:
    """One SCHEMA table from `kinds` (kind -> pandas rows). Rows holding `_row` take
    _FROM_RECORD columns and the timestamp from that row of `records`."""
    parts = []
    for kind, rows in kinds.items():
        rows = rows.reset_index(drop=True)
        taken = records.take(pa.array(rows["_row"].to_numpy())) if "_row" in rows else None
        columns = [
            pa.array([kind] * len(rows), pa.string())
            if name == "kind"
            else _column(name, rows, taken)
            for name in SCHEMA.names
        ]
        parts.append(pa.Table.from_arrays(columns, schema=SCHEMA))
    return pa.concat_tables(parts) if parts else SCHEMA.empty_table()
