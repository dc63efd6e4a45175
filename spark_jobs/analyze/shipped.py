"""The rows the rebuild's passes move into the Python workers, packed into fewer columns.

Moving rows into the workers (mapInArrow) is most of the passes' time: ~3.5 s per 10M rows,
and ~0.5 s more per column, a string column more (bench/HISTORY.md, "The rebuild at 10M:
codes into the workers"). So what a worker can tell from a small list it is given travels as
an integer code: a record's topic (its index in a sorted list of topics: every topic the
records may hold, or the pass fails), its partition (a Kafka partition is a non-negative
int32: the low 32 bits) and whether it is committed (the lowest bit); a stream pass record's
anomaly beside its topic. A source record's two lists of pipelines (filtered_by,
filter_undecided_by) travel as one string. The worker decodes them into the columns the pass
reads (per_id.COLUMNS, stream records) before any work: the same rows, the same results.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dgm.contracts.vocabulary import OrderAnomaly
from spark_jobs.analyze import order
from spark_jobs.analyze.context import Context

_HIGH = 2**32
# A list of pipeline names is joined by commas, the two lists by a semicolon: a pipeline name
# holds neither (dgm/config/pipelines.py), and id_frame.marked splits the commas.
_LISTS = ";"
ID_SHIPPED = ("code", "offset", "timestamp", "message_id", "key", "producer", "seq", "lineage",
              "filters", "arrived_at")  # fmt: skip
# The list columns of pipeline names go to the Python workers joined into one string
# (id_frame.marked splits them; a pipeline name holds no comma): Arrow-encoding array
# columns into and out of the workers made the per-id stage 7x slower (22 s against 3 s
# for 1M rows through an identity mapInArrow; bench/HISTORY.md, "Sampling: ...").
JOINED = ("filtered_by", "filter_undecided_by")
STREAM_SHIPPED = ("code", "stream", "offset", "timestamp", "message_id", "position")
ANOMALIES = (OrderAnomaly.OUT_OF_ORDER.value, OrderAnomaly.SINK_OUT_OF_ORDER.value)


def _index(topics: Sequence[str]) -> Column:
    """The topic's index in `topics` (-1 when not there)."""
    return F.array_position(F.array(*(F.lit(t) for t in topics)), F.col("topic")) - 1


def _code(kind: Column) -> Column:
    """`kind` (a non-negative long), the partition and `committed` as one long."""
    where = kind * _HIGH + F.col("partition").cast("long")
    return (where * 2 + F.col("committed").cast("long")).alias("code")


def _decoded(code: np.ndarray) -> tuple[np.ndarray, pa.Array, pa.Array]:
    """(kind, partition, committed) of codes."""
    where = code // 2
    kind = where // _HIGH
    if len(kind) and kind.min() < 0:
        raise ValueError("a record's topic is not among the topics its pass was given")
    return kind, pa.array(where % _HIGH).cast(pa.int32()), pa.array(code % 2 == 1)


def _topics(topics: Sequence[str], index: np.ndarray) -> pa.Array:
    """Topic names of indexes into `topics`."""
    return pa.array(list(topics), pa.string()).take(pa.array(index))


def id_coded(fingerprints: DataFrame, topics: Sequence[str]) -> DataFrame:
    """Fingerprints as by_id ships them (ID_SHIPPED): `topics` every topic they hold."""
    lists = [F.coalesce(F.array_join(c, ","), F.lit("")) for c in JOINED]
    marked = F.col(JOINED[0]).isNotNull() | F.col(JOINED[1]).isNotNull()
    filters = F.when(marked, F.concat_ws(_LISTS, *lists)).alias("filters")
    kept = [F.col(c) for c in ID_SHIPPED if c not in ("code", "filters")]
    return fingerprints.select(_code(_index(topics).cast("long")), *kept, filters)


def id_decoded(batch: pa.Table, topics: Sequence[str]) -> pa.Table:
    """per_id.COLUMNS of id_coded rows (the two lists joined by commas, as by_id ships them)."""
    index, partition, committed = _decoded(batch["code"].to_numpy())
    split = pc.split_pattern(batch["filters"].combine_chunks(), _LISTS)
    return pa.table(
        {
            "topic": _topics(topics, index),
            "partition": partition,
            **{c: batch[c] for c in ("offset", "timestamp", "message_id", "key", "producer")},
            **{c: batch[c] for c in ("seq", "lineage")},
            "committed": committed,
            "filtered_by": pc.list_element(split, 0),
            "filter_undecided_by": pc.list_element(split, 1),
            "arrived_at": batch["arrived_at"],
        }
    )


def stream_topics(ctx: Context) -> list[str]:
    """Every topic passes.stream_records may hold a record of, sorted."""
    return sorted({*ctx.sources, *order.kafka_topics(ctx.sinks)})


def stream_coded(records: DataFrame, topics: Sequence[str]) -> DataFrame:
    """passes.stream_records rows as the stream pass ships them (STREAM_SHIPPED)."""
    sink = (F.col("anomaly") == OrderAnomaly.SINK_OUT_OF_ORDER.value).cast("long")
    return records.select(_code(_index(topics).cast("long") * 2 + sink), *STREAM_SHIPPED[1:])


def stream_key() -> Column:
    """A stream's code: a stream_coded code without `committed` (the stream is this and the
    `stream` name; aborted records belong to it as committed ones do)."""
    return F.shiftright("code", 1)


def stream_decoded(batch: pa.Table, topics: Sequence[str]) -> pa.Table:
    """The stream_records rows (order.COLUMNS and committed) of stream_coded ones."""
    kind, partition, committed = _decoded(batch["code"].to_numpy())
    return pa.table(
        {
            "anomaly": pa.array(ANOMALIES).take(pa.array(kind % 2)),
            "topic": _topics(topics, kind // 2),
            "partition": partition,
            **{c: batch[c] for c in ("offset", "timestamp", "message_id", "stream", "position")},
            "committed": committed,
        }
    )
