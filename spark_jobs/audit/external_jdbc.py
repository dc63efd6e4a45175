"""An external sink table in PostgreSQL (or any JDBC database) read incrementally.

Each read takes only the rows whose `incremental_column` (a serial or a timestamp set on
insert) is above the last value read, through Spark's JDBC source: first the new upper bound
(`SELECT MAX(col) ... WHERE col > last`, an aggregate pushed to the database), then the rows in
(last, upper] — both predicates pushed down, so the database answers from the column's index
and a cycle costs what was added, not what the table holds. The rows become FINGERPRINT rows
like a file sink's (spark_jobs.audit.external): topic `external:<pipeline>:<table>`,
partition 0, offset = the incremental column (a timestamp's microseconds since the epoch),
message id from `id_column`, timestamp from `stored_at` when the table has one, lineage from
`source_columns`, committed true.

What a read by an increasing column cannot see (docs/design.md, external sinks): a row
updated or deleted after it was read (its fingerprint stays as first read), and a row whose
value is at or below a position already read when it becomes visible — a serial taken by a
transaction that commits after a later one (sequence values are handed out at insert, rows
become visible at commit), or a timestamp set by the writer's clock before the commit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import reduce

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dgm.config.external_sinks import FILE_KINDS, ExternalSink
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.message_ids import SRC_PATTERN
from spark_jobs.audit.external import TIME_COLUMN, ExternalSinkError
from spark_jobs.schemas import FINGERPRINT

# A JDBC read of more rows than this is split into ranges of the column, read in parallel.
ROWS_PER_PARTITION = 1_000_000

Position = int | datetime | date
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class IncrementalRead:
    """The rows added since `after`: FINGERPRINT columns; `upto` is the position to keep."""

    fingerprints: DataFrame
    after: Position | None
    upto: Position | None  # == after when nothing was added


def driver_packages(pipelines: Iterable[PipelineConfig]) -> tuple[str, ...]:
    """The Maven coordinates of the JDBC drivers the pipelines' sinks need (for
    spark.jars.packages, beside the Kafka source), each once."""
    found = [
        p.external_sink.jdbc_driver()[1]
        for p in pipelines
        if p.external_sink is not None and p.external_sink.kind not in FILE_KINDS
    ]
    return tuple(dict.fromkeys(found))


def jdbc_options(sink: ExternalSink) -> dict[str, str]:
    """Spark JDBC options; the password is among them, so never print them."""
    driver, _ = sink.jdbc_driver()
    options = {"url": sink.url, "dbtable": sink.table, "driver": driver}
    options["pushDownPredicate"] = options["pushDownAggregate"] = "true"
    if sink.user:
        options["user"] = sink.user
    if sink.password:
        options["password"] = sink.password
    return options


def _where(pipeline: PipelineConfig, sink: ExternalSink) -> str:
    return (
        f"pipeline {pipeline.name!r}: external sink {sink.kind} table {sink.table!r} at {sink.url}"
    )


def _failure(error: Exception) -> str:
    """The first line of a JDBC failure: the database's own words (never the options)."""
    text = str(error.java_exception) if isinstance(error, Py4JJavaError) else str(error)
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


def _table(spark: SparkSession, pipeline: PipelineConfig, sink: ExternalSink) -> DataFrame:
    try:
        frame = spark.read.format("jdbc").options(**jdbc_options(sink)).load()
    except (Py4JJavaError, PySparkException) as error:
        raise ExternalSinkError(
            f"{_where(pipeline, sink)}: cannot read it (check [pipelines] external_sink.table, "
            f"url, user and password): {_failure(error)}"
        ) from None
    present = set(frame.columns)
    for key, column in (
        ("incremental_column", sink.incremental_column),
        ("id_column", sink.id_column),
        *(("source_columns", c) for c in sink.source_columns),
    ):
        if column not in present:
            raise ExternalSinkError(
                f"{_where(pipeline, sink)} has no column {column!r} "
                f"(check [pipelines] external_sink.{key})"
            )
    kind = frame.schema[sink.incremental_column].dataType
    if not isinstance(kind, T.IntegralType | T.TimestampType | T.TimestampNTZType | T.DateType):
        raise ExternalSinkError(
            f"{_where(pipeline, sink)}: column {sink.incremental_column!r} is "
            f"{kind.simpleString()}, expected a serial (integer) or a timestamp "
            "(check [pipelines] external_sink.incremental_column)"
        )
    return frame


def read_incremental(
    spark: SparkSession, pipeline: PipelineConfig, after: Position | None
) -> IncrementalRead:
    """The rows of `pipeline`'s JDBC sink whose incremental column is above `after` (every
    row when None); ExternalSinkError, naming the pipeline and the key, when the table or a
    column is not what the config says or the database cannot be read."""
    sink = pipeline.external_sink
    if sink is None or sink.kind in FILE_KINDS:
        raise ValueError(f"pipeline {pipeline.name!r} has no JDBC external sink")
    table = _table(spark, pipeline, sink)
    column = F.col(sink.incremental_column)
    upto = _upper_bound(spark, pipeline, sink, after)
    if upto is None:  # nothing added
        return IncrementalRead(to_fingerprints(table.limit(0), pipeline, sink), after, after)
    rows = _ranged(spark, table, sink, after, upto).where(column <= F.lit(upto))
    if after is not None:
        rows = rows.where(column > F.lit(after))
    return IncrementalRead(to_fingerprints(rows, pipeline, sink), after, upto)


def _quoted(sink: ExternalSink, column: str) -> str:
    if sink.kind == "postgresql" or not _PLAIN.fullmatch(column):
        return '"' + column.replace('"', '""') + '"'
    return column  # another database: its own quoting may differ, a plain name needs none


def _literal(position: Position) -> str:
    """`position` as standard SQL (it came from this column, so it is an int or a date/time)."""
    if isinstance(position, datetime):
        # PySpark hands timestamps over as naive local times: state the instant in UTC.
        instant = position.astimezone(UTC)
        return f"TIMESTAMP WITH TIME ZONE '{instant.isoformat(sep=' ')}'"
    if isinstance(position, date):
        return f"DATE '{position.isoformat()}'"
    return str(int(position))


def _upper_bound(
    spark: SparkSession, pipeline: PipelineConfig, sink: ExternalSink, after: Position | None
) -> Position | None:
    """The largest value of the column above `after`, computed by the database (one index
    lookup): Spark's JDBC source does not push an aggregate down, so it is a query of ours."""
    column = _quoted(sink, sink.incremental_column)
    where = "" if after is None else f" WHERE {column} > {_literal(after)}"
    options = {k: v for k, v in jdbc_options(sink).items() if k != "dbtable"}
    options["query"] = f"SELECT MAX({column}) AS upto FROM {sink.table}{where}"
    try:
        found = spark.read.format("jdbc").options(**options).load().first()
    except (Py4JJavaError, PySparkException) as error:
        raise ExternalSinkError(f"{_where(pipeline, sink)}: {_failure(error)}") from None
    return None if found is None else found["upto"]  # type: ignore[no-any-return]


def _ranged(
    spark: SparkSession,
    table: DataFrame,
    sink: ExternalSink,
    after: Position | None,
    upto: Position,
) -> DataFrame:
    """`table`, or for a large range of an integer column the same table read in parallel
    ranges of it (Spark's partitionColumn: one query per range, each with the predicates)."""
    if not isinstance(upto, int) or isinstance(upto, bool):
        return table
    low = 0 if after is None else int(after) + 1  # type: ignore[arg-type]
    parts = min((upto - low) // ROWS_PER_PARTITION + 1, 4 * spark.sparkContext.defaultParallelism)
    if parts < 2:
        return table
    options = {
        **jdbc_options(sink),
        "partitionColumn": sink.incremental_column,
        "lowerBound": str(low),
        "upperBound": str(upto + 1),
        "numPartitions": str(parts),
    }
    return spark.read.format("jdbc").options(**options).load()


def _offset(column: Column, kind: T.DataType) -> Column:
    if isinstance(kind, T.IntegralType):
        return column.cast("long")
    return F.unix_micros(column.cast("timestamp"))


def _timestamp(frame_columns: set[str], schema: T.StructType) -> Column:
    if TIME_COLUMN not in frame_columns:
        return F.lit(None).cast("timestamp")
    kind = schema[TIME_COLUMN].dataType
    column = F.col(TIME_COLUMN)
    if isinstance(kind, T.NumericType):  # unix seconds, like a file sink's
        return F.timestamp_micros(F.round(column.cast("double") * 1_000_000).cast("long"))
    return column.cast("timestamp")


def to_fingerprints(rows: DataFrame, pipeline: PipelineConfig, sink: ExternalSink) -> DataFrame:
    """FINGERPRINT rows from the table's rows, as external.to_fingerprints makes them."""
    schema, present = rows.schema, set(rows.columns)
    ids = F.col(sink.id_column).cast("string")
    if len(sink.source_columns) == 1:
        lineage = F.col(sink.source_columns[0]).cast("string")
    elif sink.source_columns:
        lineage = F.concat_ws("/", *(F.col(c).cast("string") for c in sink.source_columns))
        # concat_ws skips nulls: a row missing a part has no lineage, as in the file sinks.
        missing = reduce(Column.__or__, (F.col(c).isNull() for c in sink.source_columns))
        lineage = F.when(~missing, lineage)
    else:
        lineage = F.lit(None).cast("string")
    parsed = lineage.rlike(SRC_PATTERN)

    def part(group: int, kind: str) -> Column:
        return F.when(parsed, F.regexp_extract(lineage, SRC_PATTERN, group)).cast(kind)

    nothing = F.lit(None).cast("string")
    columns = {
        "topic": F.lit(pipeline.sink_names()[-1]),
        "partition": F.lit(0).cast("int"),
        "offset": _offset(F.col(sink.incremental_column), schema[sink.incremental_column].dataType),
        "timestamp": _timestamp(present, schema),
        "message_id": F.when(ids != "", ids),
        "key": nothing,
        "producer": nothing,
        "seq": F.lit(None).cast("long"),
        "lineage": lineage,
        "src_topic": part(1, "string"),
        "src_partition": part(2, "int"),
        "src_offset": part(3, "long"),
        "committed": F.lit(True),
        # A sink's rows: no pipeline's `expected` predicate applies to them.
        "filtered_by": F.lit(None),
        "filter_undecided_by": F.lit(None),
        # No LSO tells when a sink's row arrived.
        "arrived_at": F.lit(None),
        "arrival_resolution_us": F.lit(None),
    }
    return rows.select(*(columns[f.name].cast(f.dataType).alias(f.name) for f in FINGERPRINT))
