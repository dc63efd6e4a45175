"""A sink copy's source position from the id join, for Kafka sink records without dgm-src
(docs/design.md, "Order, beside the delivery semantic"): Kafka's own tools (Streams, MirrorMaker
2, console relays) stamp no lineage, so their sink order is judged from the one committed record
holding the copy's message id in the source topics of the pipelines writing its sink topic.

Only the sink topics holding such records are joined, on message_id. A cycle joins its new sink
records against the kept and new records of their ids, on the driver (cycle_streams.py, whose
`cycle_relinks` says when a new source record changes what an id join gave a kept sink record).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.analyze import order
from spark_jobs.analyze.context import Context

SRC = ("src_topic", "src_partition", "src_offset")


def id_routes(ctx: Context) -> dict[str, tuple[str, ...]]:
    """Kafka sink topic -> the source topics of the pipelines writing it, sampled topics left
    out (Context.sampled: their streams have holes)."""
    found = {}
    for sink in order.kafka_topics(ctx.sinks):
        if sink in ctx.sampled:
            continue
        read = {t for p in ctx.sinks[sink] for t in ctx.source_topics.get(p, ())}
        kept = sorted(t for t in read if t not in ctx.sampled)
        if kept:
            found[sink] = tuple(kept)
    return found


def _unstamped(sinks: Iterable[str]) -> Column:
    """Committed identified records of `sinks` without dgm-src: those the join places.
    Null-safe, so that its negation keeps every other record."""
    wanted = F.col("topic").isin(*sinks) & F.col("src_topic").isNull()
    wanted &= F.col("committed") & F.col("message_id").isNotNull()
    return F.coalesce(wanted, F.lit(False))


def _sources(routes: Mapping[str, tuple[str, ...]]) -> list[str]:
    return sorted({source for sources in routes.values() for source in sources})


def _held(frame: DataFrame, routes: Mapping[str, tuple[str, ...]]) -> DataFrame:
    """(sink, message_id, source: the topic's index in _sources, partition, offset): the
    committed identified records of `frame` in each sink's source topics, once per sink they
    feed."""
    sources = _sources(routes)
    pairs = [(sink, sources.index(t)) for sink, feeding in routes.items() for t in feeding]
    feeds = frame.sparkSession.createDataFrame(pairs, "sink string, source int")
    # The topic as an index: min of a string would make Spark sort-aggregate every row.
    index = F.array_position(F.array(*(F.lit(t) for t in sources)), F.col("topic")) - 1
    return (
        frame.where(
            F.col("topic").isin(*sources) & F.col("committed") & F.col("message_id").isNotNull()
        )
        .withColumn("source", index.cast("int"))
        .join(F.broadcast(feeds), "source")
        .select("sink", "message_id", "source", "partition", "offset")
    )


def positions(held: DataFrame, routes: Mapping[str, tuple[str, ...]]) -> DataFrame:
    """(topic: the sink, message_id, src_topic, src_partition, src_offset): each sink's ids
    held by exactly one committed record of its source topics in `held`, and where it lies. An
    id held by several (an upstream duplicate) gets none: which copy was read is not known."""
    names = F.array(*(F.lit(t) for t in _sources(routes)))
    return (
        _held(held, routes)
        .groupBy("sink", "message_id")
        .agg(
            F.count(F.lit(1)).alias("records"),
            # One record per kept group: min is that record's value.
            F.min("source").alias("source"),
            F.min("partition").alias("src_partition"),
            F.min("offset").alias("src_offset"),
        )
        .where(F.col("records") == 1)
        .select(
            F.col("sink").alias("topic"),
            "message_id",
            F.element_at(names, F.col("source") + 1).alias("src_topic"),
            "src_partition",
            "src_offset",
        )
    )


def unstamped_sinks(
    frame: DataFrame, ctx: Context, known: Collection[str] = frozenset()
) -> frozenset[str]:
    """The sink topics of id_routes holding committed identified records of `frame` without
    dgm-src: the only ones joined. One small query: a lab whose processors all stamp dgm-src
    joins nothing. Sinks `known` to be unstamped are not looked for (none: no query)."""
    routes = {sink: sources for sink, sources in id_routes(ctx).items() if sink not in known}
    if not routes:
        return frozenset()
    found = frame.where(_unstamped(routes)).select("topic").distinct().toArrow()
    return frozenset(found["topic"].to_pylist())


def unstamped_among(ctx: Context, unstamped: Collection[str]) -> frozenset[str]:
    """unstamped_sinks without a query, from the topics known to hold such records
    (context.Routes.unstamped, which the routes' aggregate finds on its way)."""
    return frozenset(sink for sink in id_routes(ctx) if sink in unstamped)


def routes_among(ctx: Context, sinks: Collection[str]) -> dict[str, tuple[str, ...]]:
    """id_routes of the `sinks` only."""
    return {sink: sources for sink, sources in id_routes(ctx).items() if sink in sinks}


def with_id_lineage(
    fingerprints: DataFrame,
    ctx: Context,
    held: DataFrame | None = None,
    sinks: Collection[str] | None = None,
) -> DataFrame:
    """`fingerprints` with src_topic, src_partition and src_offset filled for the committed
    records of Kafka sink topics without dgm-src, from `positions` over `held` (default: the
    fingerprints themselves); left null where none is found. dgm-src, when present, wins.
    `sinks`: the unstamped_sinks of the fingerprints, when known."""
    routes = routes_among(ctx, unstamped_sinks(fingerprints, ctx) if sinks is None else sinks)
    if not routes:
        return fingerprints
    placed = _unstamped(routes)
    found = positions(fingerprints if held is None else held, routes)
    filled = (
        fingerprints.where(placed)
        .drop(*SRC)
        .join(found, ["topic", "message_id"], "left")
        .select(*fingerprints.columns)
    )
    return fingerprints.where(~placed).unionByName(filled)
