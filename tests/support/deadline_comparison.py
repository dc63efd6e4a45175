"""A deadline claim's lost ids, late records and checked records from the engine against the
DuckDB reference's (tests/support/reference.py DEADLINE), and late copies of lost records
made from a generated pipeline."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dgm.contracts.vocabulary import LossCause
from tests.support import engine_run, reference
from tests.support.fingerprint_rows import T0
from tests.support.lost_comparison import assert_same, lost_per_window


def split(theirs: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(lost, late) rows of reference.deadline."""
    return (
        theirs.filter(pc.equal(theirs["kind"], "lost")),
        theirs.filter(pc.equal(theirs["kind"], "late")),
    )


def late_per_window(tables: engine_run.Tables) -> dict[datetime, int]:
    found: dict[datetime, int] = {}
    for r in tables.counts:
        if not r["total"] and r["window_us"] is not None and r["late_records"]:
            at = engine_run.EPOCH + timedelta(microseconds=r["window_us"])
            found[at] = found.get(at, 0) + r["late_records"]
    return found


def assert_agree(
    tables: engine_run.Tables,
    source: pa.Table,
    sink: pa.Table,
    now: datetime,
    delay: timedelta,
    pipeline: str = "p",
) -> tuple[int, int]:
    """(lost, late) after checking every count against the reference; `pipeline` names the
    pipeline whose filtered records (filtered_by) the reference does not check."""
    lost, late = split(reference.deadline(source, sink, now, delay, pipeline))
    gaps = reference.lost(source, sink, pa.table({"topic": pa.array([], pa.string()),
                                                  "partition": pa.array([], pa.int32()),
                                                  "committed_offset": pa.array([], pa.int64())}),
                          now, pipeline=pipeline)  # fmt: skip
    ours = [r for r in tables.lost if r["cause"] == LossCause.NOT_IN_SINK_WITHIN_MAX_DELAY]
    assert_same(ours, lost.drop_columns(["kind"]))
    assert_same([r for r in tables.lost if r not in ours], gaps)
    assert tables.lost_per_window() == lost_per_window(
        pa.concat_tables([lost.drop_columns(["kind"]), gaps], promote_options="permissive")
    )
    assert tables.total("late_records") == late.num_rows
    assert late_per_window(tables) == lost_per_window(late)
    checked = reference.deadline_checked(source, sink, now, delay, pipeline)
    assert tables.total("records_checked") == checked
    filtered = (tables.total("filtered"), tables.total("filter_undecided"))
    assert filtered == reference.filtered(source, pipeline)
    return lost.num_rows, late.num_rows


def late_copies(
    generated: Any, first_s: int, last_s: int, count: int, delay: timedelta
) -> tuple[pa.Table, pa.Table]:
    """(the sink without `count` single copies of source records timestamped in [first_s,
    last_s) seconds after T0, those copies again at the sink's end timestamped max_delay + 5 s
    after their source record)."""
    sink = generated.sink
    ids = pc.value_counts(sink.filter(sink["committed"])["message_id"])
    single = {v["values"] for v in ids.to_pylist() if v["counts"] == 1 and v["values"] is not None}
    source = generated.source
    stamps = pc.cast(source["timestamp"], pa.int64()).to_numpy() / 1e6 - T0.timestamp()
    chosen = []
    for row, at in zip(source.to_pylist(), stamps, strict=True):
        if first_s <= at < last_s and row["committed"] and row["message_id"] in single:
            chosen.append(row)
            single.discard(row["message_id"])
        if len(chosen) == count:
            break
    moved = {r["message_id"] for r in chosen}
    kept = sink.filter(pc.invert(pc.is_in(sink["message_id"], pa.array(sorted(moved)))))
    end = pc.max(sink["offset"]).as_py() + 1
    copies = [
        r | {"topic": sink["topic"][0].as_py(), "partition": 0, "offset": end + n,
             "timestamp": r["timestamp"] + delay + timedelta(seconds=5), "lineage": None,
             "src_topic": None, "src_partition": None, "src_offset": None}
        for n, r in enumerate(chosen)
    ]  # fmt: skip
    return kept, pa.Table.from_pylist(copies, schema=sink.schema)
