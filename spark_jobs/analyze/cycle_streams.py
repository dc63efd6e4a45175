"""A cycle's stream records and relinked partitions from the rows of its touched ids, read
from Spark once (engine._advanced): what passes.stream_records gives over the new rows (the id
join over the kept and new rows of their ids), and which kept sink records a new source record
moved between streams, computed on the driver.

A cycle's rows are few (the touched ids' rows), and Spark jobs on them cost seconds a cycle in
scheduling alone (bench/explain_cost.py); the rebuild keeps passes.stream_records for every
row. tests/spark_jobs/analyze/test_cycle_streams.py holds these equal to the same rules written
in Spark on generated rows; the rules are docs/design.md's, "Order, beside the delivery
semantic".
"""

from __future__ import annotations

from collections.abc import Collection

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dgm.contracts.vocabulary import OrderAnomaly
from spark_jobs.analyze import order
from spark_jobs.analyze.context import Context
from spark_jobs.analyze.lineage import id_routes, routes_among

_READ = (
    "topic", "partition", "offset", "timestamp", "message_id", "producer", "seq",
    "src_topic", "src_partition", "src_offset", "committed",
)  # fmt: skip
_COMMON = ("topic", "partition", "offset", "timestamp", "message_id")
STREAM_SCHEMA = pa.schema(
    [
        ("anomaly", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("message_id", pa.string()),
        ("stream", pa.string()),
        ("position", pa.int64()),
        ("committed", pa.bool_()),
    ]
)


def _topics(ctx: Context) -> list[str]:
    """Every topic a stream record or the id join reads: sources, Kafka sinks, and the
    sources the id join's routes name."""
    routed = {t for sources in id_routes(ctx).values() for t in sources}
    return sorted(set(ctx.sources) | set(order.kafka_topics(ctx.sinks)) | routed)


def cycle_rows(kept: DataFrame, added: DataFrame, ctx: Context) -> pa.Table:
    """The kept rows of the touched ids (`kept`) and the cycle's new rows (`added`) of the
    topics streams are made of, flagged `added`: one Spark job."""
    columns = [F.col(c) for c in _READ]
    both = kept.select(*columns, F.lit(False).alias("added")).unionByName(
        added.select(*columns, F.lit(True).alias("added"))
    )
    return both.where(F.col("topic").isin(*_topics(ctx))).toArrow()


def cycle_rows_in(kept: pa.Table, added: pa.Table, ctx: Context) -> pa.Table:
    """cycle_rows of rows already on the driver (a small cycle's: engine.py)."""
    both = pa.concat_tables(
        [
            kept.select(list(_READ)).append_column("added", pa.repeat(False, kept.num_rows)),
            added.select(list(_READ)).append_column("added", pa.repeat(True, added.num_rows)),
        ]
    )
    return both.filter(_in(both, "topic", _topics(ctx)))


def unstamped_sinks_in(
    rows: pa.Table, ctx: Context, known: Collection[str] = frozenset()
) -> frozenset[str]:
    """lineage.unstamped_sinks of rows already on the driver."""
    routes = {sink: sources for sink, sources in id_routes(ctx).items() if sink not in known}
    if not routes:
        return frozenset()
    return frozenset(rows.filter(_unstamped(rows, routes))["topic"].unique().to_pylist())


def _in(table: pa.Table, column: str, values: Collection[str]) -> pa.ChunkedArray:
    return pc.is_in(table[column], pa.array(sorted(values), pa.string()))


def _identified_committed(table: pa.Table) -> pa.ChunkedArray:
    return pc.and_(table["committed"], pc.is_valid(table["message_id"]))


def _unstamped(table: pa.Table, sinks: Collection[str]) -> pa.ChunkedArray:
    """lineage._unstamped: committed identified records of `sinks` without dgm-src."""
    wanted = pc.and_(_in(table, "topic", sinks), pc.is_null(table["src_topic"]))
    return pc.and_(wanted, _identified_committed(table))


def _held(table: pa.Table, routes: dict[str, tuple[str, ...]]) -> pa.Table:
    """lineage._held: (sink, message_id, src_topic, src_partition, src_offset) of the
    committed identified records of each sink's source topics, once per sink they feed."""
    pieces = []
    for sink, feeding in routes.items():
        rows = table.filter(pc.and_(_in(table, "topic", feeding), _identified_committed(table)))
        pieces.append(
            pa.table(
                {
                    "sink": pa.array([sink] * rows.num_rows, pa.string()),
                    "message_id": rows["message_id"],
                    "src_topic": rows["topic"],
                    "src_partition": rows["partition"],
                    "src_offset": rows["offset"],
                }
            )
        )
    return pa.concat_tables(pieces)


def _positions(held: pa.Table, routes: dict[str, tuple[str, ...]]) -> pa.Table:
    """lineage.positions: each sink's ids held by exactly one record, and where it lies."""
    rows = _held(held, routes)
    counted = rows.group_by(["sink", "message_id"]).aggregate([("src_offset", "count")])
    once = counted.filter(pc.equal(counted["src_offset_count"], 1))
    once = once.drop_columns(["src_offset_count"])
    return rows.join(once, ["sink", "message_id"], join_type="inner")


def _stream_rows(rows: pa.Table, anomaly: str, stream: pa.Array, position: pa.Array) -> pa.Table:
    columns = {"anomaly": pa.array([anomaly] * rows.num_rows, pa.string())}
    columns |= {c: rows[c] for c in _COMMON}
    columns |= {"stream": stream, "position": position, "committed": rows["committed"]}
    return pa.table(columns).cast(STREAM_SCHEMA)


def cycle_stream_records(rows: pa.Table, ctx: Context, unstamped: Collection[str]) -> pa.Table:
    """passes.stream_records(added, ctx, held=kept+added, unstamped) over cycle_rows."""
    added = rows.filter(rows["added"])
    sources = [t for t in ctx.sources if t not in ctx.sampled]  # Context.sampled: why
    stamped = pc.and_(pc.is_valid(added["producer"]), pc.is_valid(added["seq"]))
    of_sessions = added.filter(pc.and_(_in(added, "topic", sources), stamped))
    producer = _stream_rows(
        of_sessions, OrderAnomaly.OUT_OF_ORDER.value, of_sessions["producer"], of_sessions["seq"]
    )
    sinks = [t for t in order.kafka_topics(ctx.sinks) if t not in ctx.sampled]
    made = added.filter(pc.and_(_in(added, "topic", sinks), added["committed"]))
    routes = routes_among(ctx, unstamped)
    if routes:
        placed = _unstamped(made, routes)
        found = _positions(rows, routes).rename_columns(
            ["topic", "message_id", "src_topic", "src_partition", "src_offset"]
        )
        joined = made.filter(placed).drop_columns(["src_topic", "src_partition", "src_offset"])
        joined = joined.join(found, ["topic", "message_id"], join_type="inner")
        made = pa.concat_tables(
            [made.filter(pc.invert(placed)).select(joined.column_names), joined],
            promote_options="permissive",
        )
    valid = pc.and_(pc.is_valid(made["src_topic"]), pc.is_valid(made["src_partition"]))
    made = made.filter(pc.and_(valid, pc.is_valid(made["src_offset"])))
    stream = pc.binary_join_element_wise(
        made["src_topic"], pc.cast(made["src_partition"], pa.string()), "/"
    )
    sink = _stream_rows(made, OrderAnomaly.SINK_OUT_OF_ORDER.value, stream, made["src_offset"])
    return pa.concat_tables([producer, sink])


def cycle_relinks(
    rows: pa.Table, ctx: Context, sinks: Collection[str]
) -> frozenset[tuple[str, int]]:
    """The (topic, partition) of the kept committed sink records without dgm-src, of a sink
    its topic feeds (`sinks`: the kept unstamped_sinks), whose id an added committed source
    record holds: that record's position appears or goes (its id became unique, or not), and
    what was judged of its stream with it. Empty when none."""
    routes = routes_among(ctx, sinks)
    if not routes:
        return frozenset()
    kept = rows.filter(pc.invert(rows["added"]))
    copies = kept.filter(_unstamped(kept, routes)).select(["topic", "partition", "message_id"])
    sources = _held(rows.filter(rows["added"]), routes).select(["sink", "message_id"])
    sources = sources.rename_columns(["topic", "message_id"])
    found = copies.join(sources, ["topic", "message_id"], join_type="left semi")
    return frozenset(zip(found["topic"].to_pylist(), found["partition"].to_pylist(), strict=True))
