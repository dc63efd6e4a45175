"""A small cycle's rows worked out on the driver, from Arrow tables, by the same per-id code
the Spark pass runs in its Python workers (passes.by_id).

A cycle of `dgm demo` adds ~1,500 fingerprints, and its touched ids' kept rows are as few:
each Spark job over them (an aggregate, a shuffle by id, a read back) costs 0.3-2 s of
scheduling on two loaded cores whatever its rows, and they were most of a cycle
(bench/HISTORY.md, "The demo's analysis in fewer Spark jobs"). Only what needs the kept
fingerprints still runs in Spark: the ids a moved claim newly checks, and one read of the
touched ids' kept rows.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.analysis_input import ROWS, Fingerprints, conformed
from spark_jobs.analyze.checked import newly_checked
from spark_jobs.analyze.context import Context
from spark_jobs.analyze.cycle_streams import cycle_rows_in, unstamped_sinks_in
from spark_jobs.analyze.output import SCHEMA as OUTPUT
from spark_jobs.analyze.per_id import COLUMNS as ID_COLUMNS
from spark_jobs.analyze.per_id import per_id_rows
from spark_jobs.analyze.record_counts import partition_records_in
from spark_jobs.analyze.shipped import JOINED  # per_id's list columns, joined (why: there)
from spark_jobs.analyze.steps import Timings, timed

# A cycle touching at most this many ids works them out on the driver (when its added rows
# are there: analysis_input.FEW_ADDED).
FEW_TOUCHED = 100_000
ROWS_EMPTY = ROWS.empty_table()


def id_rows(fingerprints: pa.Table, ctx: Context) -> pa.Table:
    """passes.by_id of `fingerprints` (every row of each of their ids) on the driver: one
    call of per_id_rows over all of them, as one Spark partition holding every id would."""
    if fingerprints.num_rows == 0:
        return OUTPUT.empty_table()
    shipped = {
        name: pc.binary_join(fingerprints[name], ",") if name in JOINED else fingerprints[name]
        for name in ID_COLUMNS
    }
    return per_id_rows(pa.table(shipped), ctx).cast(OUTPUT)


def records_in(fingerprints: pa.Table, ctx: Context) -> pa.Table:
    """record_counts.partition_records of `fingerprints` on the driver."""
    return partition_records_in(fingerprints, ctx.window_us)


def identified(tables: Iterable[pa.Table]) -> pa.Array:
    """The distinct message ids of the `tables`' rows that have one."""
    ids = [t["message_id"].combine_chunks().cast(pa.string()).drop_null() for t in tables]
    return pc.unique(pa.concat_arrays([pa.array([], pa.string()), *ids]))


def of_ids(table: pa.Table, ids: pa.Array) -> pa.Table:
    """The rows of `table` whose message id is one of `ids`."""
    return table.filter(pc.is_in(table["message_id"], ids))


def unidentified(table: pa.Table) -> pa.Table:
    return table.filter(pc.is_null(table["message_id"]))


def minus(rows: pa.Table, others: pa.Table) -> pa.Table:
    """The rows of `rows` not in `others`, as many times as they are there more often
    (Spark's exceptAll): what an external snapshot gained or lost since the last. The n-th
    copy of a row goes when `others` holds it at least n times."""
    keys = [c for c in rows.column_names]
    mine, theirs = _numbered(rows, keys), _numbered(others, keys)
    found = mine.merge(theirs.assign(_there=True), on=[*keys, "_n"], how="left")
    return rows.filter(pa.array(found["_there"].isna().to_numpy()))


def _numbered(table: pa.Table, keys: list[str]) -> pd.DataFrame:
    """`table` as comparable pandas columns (lists joined; null, empty and [""] kept apart:
    list columns hold pipeline names, which hold no comma), each row numbered among its
    equals (pandas matches null keys with null keys, as exceptAll does)."""
    columns = {}
    for name in keys:
        column = table[name]
        if pa.types.is_list(column.type):
            size = pc.list_value_length(column)
            column = pc.binary_join_element_wise(
                pc.cast(size, pa.string()), pc.binary_join(column, ","), ":"
            )
        columns[name] = column.to_pandas()
    frame = pd.DataFrame(columns)
    return frame.assign(_n=frame.groupby(keys, dropna=False, sort=False).cumcount())


def works_on_driver(fingerprints: Fingerprints) -> bool:
    """Whether the cycle's added rows (and the external snapshots, if any) are on the driver."""
    return fingerprints.added_rows is not None and (
        fingerprints.external is None or fingerprints.external_rows is not None
    )


def touched_ids(
    fingerprints: Fingerprints,
    was: Context,
    ctx: Context,
    changes: list[pa.Table],
    timings: Timings,
) -> pa.Array:
    """The cycle's touched ids (engine.py): those of its added rows and of the external rows
    that changed (`changes`: external_changes), found on the driver, and those a moved
    claim newly checks (one Spark job over the kept fingerprints, only when a claim moved)."""
    assert fingerprints.before is not None and fingerprints.added_rows is not None
    with timed(timings, "touched ids"):
        found = [fingerprints.added_rows, *changes]
        before = fingerprints.before
        if fingerprints.external_before is not None:
            before = before.unionByName(fingerprints.external_before)
        checked = newly_checked(before, was, ctx)
        if checked is not None:
            # Not distinct in Spark: its shuffle is a job of its own; `identified` dedupes.
            found.append(checked.toArrow())
        return identified(found)


def external_changes(fingerprints: Fingerprints) -> list[pa.Table]:
    """[added, removed] external rows, from the snapshots on the driver (engine.py's
    external changes); empty when there are no snapshots."""
    now, was = fingerprints.external_rows, fingerprints.external_before_rows
    if now is None and was is None:
        return []
    now = ROWS_EMPTY if now is None else now
    was = ROWS_EMPTY if was is None else was
    return [minus(now, was), minus(was, now)]


def recomputed(
    fingerprints: Fingerprints,
    was: Context,
    ctx: Context,
    touched: pa.Array,
    changes: list[pa.Table],
    unstamped: Collection[str],
    timings: Timings,
) -> tuple[pa.Table, pa.Table, pa.Table, frozenset[str]]:
    """(the `touched` ids' per-id rows now, and before under the `was` Context; the cycle's
    cycle_rows; the sinks newly found unstamped), worked out on the driver from one Spark
    read of the touched ids' kept rows; `changes` as in touched_ids."""
    assert fingerprints.before is not None and fingerprints.added_rows is not None
    added = fingerprints.added_rows
    with timed(timings, "select"):
        common = kept_rows_of(fingerprints.before, touched) if len(touched) else ROWS_EMPTY
    now, before = [common, added], [common]
    if fingerprints.external_before_rows is not None:
        before.append(of_ids(fingerprints.external_before_rows, touched))
    if fingerprints.external_rows is not None:
        now.append(of_ids(fingerprints.external_rows, touched))
    if changes:
        now.append(unidentified(changes[0]))
        before.append(unidentified(changes[1]))
    with timed(timings, "recompute"):
        # The partitions' record counts change by the rows added, and the external rows
        # removed (record_counts.py).
        gained = [added, *changes[:1]]
        now_rows = pa.concat_tables(
            [id_rows(pa.concat_tables(now), ctx), *(records_in(t, ctx) for t in gained)]
        )
        was_rows = pa.concat_tables(
            [id_rows(pa.concat_tables(before), was), *(records_in(t, ctx) for t in changes[1:])]
        )
    with timed(timings, "stream records"):
        lacking = unstamped_sinks_in(added, ctx, unstamped)
        cycle = cycle_rows_in(common, added, ctx)
    return now_rows, was_rows, cycle, lacking


def kept_rows_of(kept: DataFrame, ids: pa.Array) -> pa.Table:
    """The rows of `kept` holding one of `ids`, on the driver: one Spark job."""
    wanted = kept.sparkSession.createDataFrame(pa.table({"message_id": ids}), "message_id string")
    return conformed(kept.join(F.broadcast(wanted), "message_id", "left_semi").toArrow())
