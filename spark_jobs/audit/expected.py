"""The pipelines' `expected` predicates, evaluated where the record's value is: in the audit.

Each source record's fingerprint names the pipelines whose predicate is false for it
(`filtered_by`: those records are filtered, never checked) and those whose predicate is NULL
for it (`filter_undecided_by`: malformed JSON, a missing field, a value a cast cannot read;
such a record is expected, checked like any other, and counted apart). docs/design.md,
"filtered", is the definition.

A predicate is Spark SQL over the Spark Kafka source's columns and `fields`, the value
decoded (spark_jobs/audit/decoded_fields.py). `check_predicates` analyzes
each against an empty frame of that schema before anything is audited, so a predicate that
does not parse, names an unknown column or is not a boolean is a ConfigError naming the
pipeline and the key. Predicates are resolved with ANSI mode off: a cast that cannot read a
value gives NULL (undecided), never a failed audit.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from dgm.config.document import DgmConfig
from dgm.config.pipelines import PipelineConfig
from dgm.config.problems import ConfigError
from dgm.contracts.registered_schemas import SchemaLookup
from spark_jobs.audit.batches import Batch
from spark_jobs.audit.decoded_fields import FIELDS, names_fields, no_fields, with_fields
from spark_jobs.audit.registry_columns import Schemas

FILTERED = "filtered_by"
UNDECIDED = "filter_undecided_by"
# The Spark Kafka source's columns (includeHeaders=true), what a predicate may name.
KAFKA_SOURCE = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(
                StructType([StructField("key", StringType()), StructField("value", BinaryType())])
            ),
        ),
    ]
)
_ANSI = "spark.sql.ansi.enabled"


def predicates(config: DgmConfig) -> dict[str, str]:
    """pipeline -> its `expected` predicate, for the pipelines that have one."""
    return {p.name: p.expected for p in config.pipelines if p.expected.strip()}


def check_predicates(spark: SparkSession, config: DgmConfig) -> None:
    """ConfigError for the first pipeline whose `expected` Spark cannot use as a predicate
    over a Kafka source record; nothing is read (and no Spark job runs without predicates)."""
    if not any(p.expected.strip() for p in config.pipelines):
        return
    empty = spark.createDataFrame([], KAFKA_SOURCE).select("*", no_fields())
    where = config.source if config.source is not None else "config"
    for index, pipeline in enumerate(config.pipelines):
        if not pipeline.expected.strip():
            continue
        key = f"{where}: pipelines[{index}].expected (pipeline {pipeline.name!r})"
        try:
            with lenient(spark):
                kind = empty.select(F.expr(pipeline.expected).alias("e")).schema["e"].dataType
        except AnalysisException as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            raise ConfigError(
                f"{key}: not a Spark SQL predicate over the Kafka record ({first}); it may name "
                f"{', '.join([*KAFKA_SOURCE.names, FIELDS])}"
            ) from None
        if not isinstance(kind, BooleanType):
            raise ConfigError(
                f"{key}: expected a predicate (true for the records the pipeline delivers), "
                f"got an expression of type {kind.simpleString()}"
            )


@contextmanager
def lenient(spark: SparkSession) -> Iterator[None]:
    """ANSI mode off while a frame is resolved (its expressions keep the mode they were
    resolved under): a cast that cannot read a value gives NULL instead of failing."""
    before = spark.conf.get(_ANSI)
    spark.conf.set(_ANSI, "false")
    try:
        yield
    finally:
        spark.conf.set(_ANSI, before if before is not None else "true")


def _named(pipelines: Mapping[str, Column]) -> Column:
    """The names whose column is true, as an array; null when none is."""
    found = F.array_compact(
        F.array(*(F.when(c, F.lit(name)) for name, c in sorted(pipelines.items())))
    )
    return F.when(F.size(found) > 0, found)


def with_expected(
    records: DataFrame,
    config: DgmConfig,
    lookup: SchemaLookup | None = None,
    schemas: Schemas | None = None,
) -> DataFrame:
    """Kafka source rows with FILTERED and UNDECIDED (null when no pipeline filters); the
    records decoded into `fields` first (by `lookup`, their cluster's registry; `schemas`:
    the batch's, when already fetched) when a predicate may read them."""
    filtering = [p for p in config.pipelines if p.expected.strip()]
    if not filtering:
        return records.withColumns(
            {
                FILTERED: F.lit(None).cast("array<string>"),
                UNDECIDED: F.lit(None).cast("array<string>"),
            }
        )
    decoding = any(names_fields(p.expected) for p in filtering)
    given = with_fields(records, lookup, schemas) if decoding else records.select("*", no_fields())
    with lenient(records.sparkSession):
        return given.withColumns(
            {
                FILTERED: _named({p.name: _mine(p) & ~F.expr(p.expected) for p in filtering}),
                UNDECIDED: _named(
                    {p.name: _mine(p) & F.expr(p.expected).isNull() for p in filtering}
                ),
            }
        ).drop(FIELDS)


def _mine(pipeline: PipelineConfig) -> Column:
    return F.col("topic").isin(*pipeline.source_topics)


def recorded_predicates(config: DgmConfig, topics: set[str]) -> dict[str, str]:
    """What a batch's manifest records (`expected`): pipeline -> its predicate ("" for
    none), for every pipeline with a source topic among `topics`."""
    return {p.name: p.expected.strip() for p in config.pipelines if topics & set(p.source_topics)}


def stale_topics(config: DgmConfig, batches: Iterable[Batch]) -> dict[str, set[str]]:
    """Source topic -> the pipelines reading it whose predicate differs from the one a stored
    batch holding the topic was audited under (a batch without the record: none)."""
    stale: dict[str, set[str]] = {}
    for batch in batches:
        recorded = batch.manifest.get("expected", {})
        held = {r["topic"] for r in batch.ranges}
        for p in config.pipelines:
            if recorded.get(p.name, "") == p.expected.strip():
                continue
            for topic in held & set(p.source_topics):
                stale.setdefault(topic, set()).add(p.name)
    return stale
