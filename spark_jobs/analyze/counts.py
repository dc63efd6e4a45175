"""The per-key counts the engine keeps between cycles, and the fingerprint-wide published tables
made from them and from the kept record rows, on the driver (a few rows per key and window).

Counts are sums over message ids, so a cycle adds the rows of the ids it touches as they are
now and subtracts their rows as they were (output.py's kinds `pipeline`, `topic`,
`partition`); the partitions' record counts are sums over records (record_counts.py), so it
adds those of the records it added. The span of checked records (first/last_checked_us) is a
min and max: a cycle only widens it, and whatever could narrow it (offsets moving back,
records expiring) makes the engine rebuild.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from dgm.contracts import published as tables
from dgm.contracts.vocabulary import OrderAnomaly
from spark_jobs.analyze.latency import KIND
from spark_jobs.analyze.output import COUNTS, NO_TIME, PIPELINE_COUNTS, TOPIC_COUNTS
from spark_jobs.analyze.publish import conform_arrow

KEYS = ["kind", "pipeline", "topic", "partition", "window_us", "total"]
COUNT_KINDS = ("pipeline", "topic", "partition", KIND)
RECORD_KINDS = ("duplicates", "lost", "late")
SPANS = ["first_checked_us", "last_checked_us"]
_NONE = "\u0000"  # a null name in a key (names hold no NUL)
_STAMP = pa.timestamp("us", tz="UTC")


def count_rows(rows: pa.Table, sign: int = 1) -> pd.DataFrame:
    """The count kinds of output rows as pandas: keys with nulls made comparable, counts
    times `sign` with null as 0, spans as float micros (NaN when none; dropped for -1)."""
    rows = rows.filter(pc.is_in(rows["kind"], pa.array(COUNT_KINDS)))
    frame = pd.DataFrame(
        {
            "kind": rows["kind"].to_pandas(),
            "pipeline": rows["pipeline"].fill_null(_NONE).to_pandas(),
            "topic": rows["topic"].fill_null(_NONE).to_pandas(),
            "partition": rows["partition"].cast(pa.int64()).fill_null(-1).to_pandas(),
            "window_us": rows["window_us"].fill_null(NO_TIME).to_pandas(),
            "total": rows["total"].fill_null(False).to_pandas(),
        }
    )
    for name in COUNTS:
        frame[name] = rows[name].fill_null(0).to_pandas() * sign
    for name in SPANS:
        spans = rows[name].cast(pa.float64()).to_pandas()
        frame[name] = spans if sign > 0 else np.nan
    return frame


def summed(*parts: pd.DataFrame) -> pd.DataFrame:
    """`parts` summed per key (spans: min and max); keys whose counts all came to 0 go."""
    whole = pd.concat(parts, ignore_index=True)
    grouped = whole.groupby(KEYS, sort=False)
    sums = grouped[list(COUNTS)].sum()
    spans = grouped.agg(first_checked_us=(SPANS[0], "min"), last_checked_us=(SPANS[1], "max"))
    out = sums.join(spans).reset_index()
    held = (out[list(COUNTS)] != 0).any(axis=1) | out[SPANS[0]].notna()
    return out[held].reset_index(drop=True)


def added(counts: pd.DataFrame, more: pd.DataFrame) -> pd.DataFrame:
    """`summed` counts with the count rows `more` added: only the kinds `more` holds are
    summed again (a rebuild's partition windows, most of the counts, are not)."""
    if not len(more):
        return counts
    touched = counts["kind"].isin(set(more["kind"]))
    return pd.concat([counts[~touched], summed(counts[touched], more)], ignore_index=True)


def _ints(values: pd.Series, none: int | None = None) -> pa.Array:
    numbers = values.astype("float64")
    absent = numbers.isna() if none is None else numbers.isna() | (numbers == none)
    return pa.array(numbers.fillna(0).to_numpy().astype("int64"), mask=absent.to_numpy())


def _names(values: pd.Series) -> pa.Array:
    return pa.array(values.where(values != _NONE, None).astype(object), pa.string())


def _window_start(window_us: pd.Series) -> pa.Array:
    return _ints(window_us, NO_TIME).cast(_STAMP)


def topic_windows(counts: pd.DataFrame) -> pa.Table:
    rows = counts[counts["kind"] == "topic"]
    extra = rows["duplicate_copies"].where(
        ~rows["total"], rows["identified"] - rows["distinct_ids"]
    )
    distinct = rows["distinct_ids"]
    rate = (extra / distinct.where(distinct != 0)).astype("float64")
    data = {
        "topic": _names(rows["topic"]),
        "window_start": _window_start(rows["window_us"]),
        **{n: pa.array(rows[n].to_numpy().astype("int64")) for n in TOPIC_COUNTS},
        "duplicate_copies": pa.array(extra.to_numpy().astype("int64")),
        "duplicate_rate": pa.array(rate.to_numpy(), mask=rate.isna().to_numpy()),
    }
    return conform_arrow(pa.table(data), tables.TOPIC_WINDOWS)


def partition_windows(counts: pd.DataFrame) -> pa.Table:
    rows = counts[counts["kind"] == "partition"]
    data = {
        "topic": _names(rows["topic"]),
        "partition": pa.array(rows["partition"].to_numpy().astype("int32")),
        "window_start": _window_start(rows["window_us"]),
        **{n: pa.array(rows[n].to_numpy().astype("int64")) for n in ("records", "aborted")},
        "duplicate_copies": pa.array(rows["duplicate_copies"].to_numpy().astype("int64")),
    }
    return conform_arrow(pa.table(data), tables.PARTITION_WINDOWS)


def pipeline_counts(counts: pd.DataFrame) -> pa.Table:
    """(pipeline, window_us, total, PIPELINE_COUNTS..., distinct_ids, first/last_checked_us):
    what pipeline_metrics.pipeline_tables reads; window_us null for totals and untimed rows."""
    rows = counts[counts["kind"] == "pipeline"]
    names = [*PIPELINE_COUNTS, "distinct_ids"]
    return pa.table(
        {
            "pipeline": _names(rows["pipeline"]),
            "window_us": _ints(rows["window_us"], NO_TIME),
            "total": pa.array(rows["total"].to_numpy().astype(bool)),
            **{n: pa.array(rows[n].to_numpy().astype("int64")) for n in names},
            **{n: _ints(rows[n]) for n in SPANS},
        }
    )


def record_table(records: pa.Table, kind: str, table: tables.Table) -> pa.Table:
    """The `kind` rows of kept record rows (output.SCHEMA) as `table`'s."""
    rows = records.filter(pc.equal(records["kind"], kind))
    stamps = rows["timestamp_us"].cast(_STAMP)
    return conform_arrow(rows.append_column("timestamp", stamps), table)


def late_table(records: pa.Table) -> pa.Table:
    """The late rows of kept record rows as the late_records table, slowest first."""
    rows = record_table(records, "late", tables.LATE_RECORDS)
    delays = records.filter(pc.equal(records["kind"], "late"))["delay_us"]
    seconds = pc.divide(delays.cast(pa.float64()), 1e6)
    table = rows.set_column(rows.schema.get_field_index("delay_s"), "delay_s", seconds)
    return table.take(pc.sort_indices(table, [("delay_s", "descending")]))


def gap_table(lost: pd.DataFrame) -> pa.Table:
    """Sequence gaps' lost rows (per_session.gap_rows) as the lost table's."""
    data = {
        "pipeline": pa.array(lost["pipeline"].astype(object), pa.string()),
        "topic": pa.array(lost["topic"].astype(object), pa.string()),
        "partition": pa.array(lost["partition"].to_numpy().astype("int32")),
        "producer": pa.array(lost["producer"].astype(object), pa.string()),
        "seq": pa.array(lost["seq"].to_numpy().astype("int64")),
        "missing": pa.array(lost["missing"].to_numpy().astype("int64")),
        "cause": pa.array(lost["cause"].astype(object), pa.string()),
    }
    return conform_arrow(pa.table(data), tables.LOST)


def gap_counts(counted: pd.DataFrame) -> pd.DataFrame:
    """Sequence gaps' counts per pipeline window (per_session.gap_rows) as count rows."""
    frame = pd.DataFrame(
        {
            "kind": "pipeline",
            "pipeline": counted["pipeline"].astype(object),
            "topic": _NONE,
            "partition": -1,
            "window_us": counted["window_us"].astype("int64"),
            "total": False,
        }
    )
    for name in COUNTS:
        frame[name] = counted[name].astype("int64") if name in counted else 0
    return frame.assign(**dict.fromkeys(SPANS, np.nan))


def order_counts(behind: pd.DataFrame, attributed: pd.DataFrame, window_us: int) -> pd.DataFrame:
    """The records out of order as count rows: `out_of_order` per topic (each record once, in
    its window when timed, and in the topic's total), and per pipeline (`attributed`, as
    order.per_pipeline gives them) `producer_out_of_order` or `sink_out_of_order`."""
    producer = (attributed["anomaly"] == OrderAnomaly.OUT_OF_ORDER.value).astype("int64")
    timed = behind[behind["timestamp_us"] != NO_TIME]
    parts = [
        _count_rows("topic", timed["topic"], _NONE, _window(timed, window_us), False,
                    out_of_order=1),
        _count_rows("topic", behind["topic"], _NONE, NO_TIME, True, out_of_order=1),
        _count_rows("pipeline", _NONE, attributed["pipeline"], _window(attributed, window_us),
                    False, producer_out_of_order=producer, sink_out_of_order=1 - producer),
    ]  # fmt: skip
    return (
        pd.concat([p for p in parts if len(p)], ignore_index=True)
        if any(map(len, parts))
        else (pd.DataFrame(columns=[*KEYS, *COUNTS, *SPANS]))
    )


def _window(rows: pd.DataFrame, window_us: int) -> pd.Series:
    stamps = rows["timestamp_us"].astype("int64")
    return stamps.where(stamps == NO_TIME, stamps - stamps % window_us)


def _count_rows(
    kind: str, topic: Any, pipeline: Any, window_us: Any, total: bool, **counts: Any
) -> pd.DataFrame:
    """Count rows (KEYS, COUNTS, SPANS) of one kind: one per element of the Series given."""
    index = next(v.index for v in (topic, pipeline, window_us) if isinstance(v, pd.Series))
    frame = pd.DataFrame(
        {"kind": kind, "pipeline": pipeline, "topic": topic, "partition": -1,
         "window_us": window_us, "total": total},
        index=index,
    )  # fmt: skip
    for name in COUNTS:
        frame[name] = counts.get(name, 0)
    frame = frame.astype({name: "int64" for name in COUNTS} | {"window_us": "int64"})
    return frame.assign(**dict.fromkeys(SPANS, np.nan)).reset_index(drop=True)


def out_of_order_table(behind: pd.DataFrame, attributed: pd.DataFrame) -> pa.Table:
    """The out_of_order table: every record behind once, a sink's once per pipeline it counts
    against (pipeline null for a producer session's, and for a sink record no pipeline's)."""
    sink = OrderAnomaly.SINK_OUT_OF_ORDER.value
    keys = ["anomaly", "topic", "partition", "offset"]
    owned = attributed[attributed["anomaly"] == sink]
    alone = behind.merge(owned[keys].drop_duplicates(), on=keys, how="left", indicator=True)
    alone = alone[alone["_merge"] == "left_only"].drop(columns=["_merge"])
    rows = pd.concat([alone.assign(pipeline=None), owned], ignore_index=True)
    stamps = rows["timestamp_us"].astype("int64") if len(rows) else pd.Series(dtype="int64")
    data = {
        "anomaly": pa.array(rows["anomaly"].astype(object), pa.string()),
        "pipeline": pa.array(rows["pipeline"].astype(object).where(rows["pipeline"].notna(), None),
                             pa.string()),
        "topic": pa.array(rows["topic"].astype(object), pa.string()),
        "partition": pa.array(rows["partition"].to_numpy(dtype="int64")).cast(pa.int32()),
        "offset": pa.array(rows["offset"].to_numpy(dtype="int64")),
        "timestamp": _ints(stamps, NO_TIME).cast(_STAMP),
        "message_id": pa.array(
            rows["message_id"].astype(object).where(rows["message_id"].notna(), None),
            pa.string(),
        ),
        "stream": pa.array(rows["stream"].astype(object), pa.string()),
        **{n: pa.array(rows[n].to_numpy(dtype="int64")) for n in
           ("position", "preceded_by", "preceded_at")},
    }  # fmt: skip
    return conform_arrow(pa.table(data), tables.OUT_OF_ORDER)
