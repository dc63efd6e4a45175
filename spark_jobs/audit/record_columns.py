"""A Kafka record's fingerprint, built with JVM-native columns only.

`fingerprints` turns rows of the Spark Kafka source (key, value, topic, partition, offset,
timestamp, headers) into FINGERPRINT rows: the id by the topic's rule
(message_id_columns.py), the audit headers read by the rules of dgm/contracts/message_ids.py.
No Python UDF runs per record: header lookups, JSON paths, hashing and parsing are all
Catalyst expressions, so the work stays in the JVM. Whether a record is committed is marked
afterwards (aborted_marking.py).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dgm.config.pipelines import MessageIdRule
from dgm.contracts import headers
from dgm.contracts.fingerprints import COORDINATES
from dgm.contracts.message_ids import SEQ_DIGITS, SRC_PATTERN
from spark_jobs.audit.message_id_columns import bounded, header, message_id
from spark_jobs.audit.registry_columns import (
    Schemas,
    final_reason,
    with_framing,
    with_registry_id,
)
from spark_jobs.audit.unidentified import ReasonCounts
from spark_jobs.schemas import FINGERPRINT

# What fingerprints() reads from a Spark Kafka source row.
KAFKA_COLUMNS = ("key", "value", *COORDINATES, "timestamp", "headers")

_SEQ = f"^{SEQ_DIGITS}$"


def _digits(text: Column, pattern: str, group: int, to: str) -> Column:
    part = F.regexp_extract(text, pattern, group)
    return F.when(text.rlike(pattern), part.try_cast(to))


def fingerprints(
    records: DataFrame,
    rule: MessageIdRule,
    schemas: Schemas | None = None,
    reasons: ReasonCounts | None = None,
) -> DataFrame:
    """FINGERPRINT rows from Spark Kafka source rows (read with includeHeaders=true).

    `schemas`: for kind = "registry_field", the writer schemas of the batch's records, by
    (id kind, schema id) (registry_columns.schema_keys and fetch_schemas); a record whose
    schema is not among them has no id.

    `committed` starts true: a read of a topic that never saw a transaction needs no second
    view. Where the topic has seen transactions, pass the result to
    aborted_marking.mark_committed.

    `reasons`: for kind = "registry_field", counts the records without an id by reason as
    the frame's job runs (unidentified.py).
    """
    present = set(records.columns)  # one schema request to the JVM, not one per name
    missing = [name for name in KAFKA_COLUMNS if name not in present]
    if missing:
        raise ValueError(
            f"fingerprints need the Spark Kafka source's columns, missing {', '.join(missing)}"
            " (headers come only with includeHeaders=true)"
        )
    if rule.kind == "registry_field":
        records, found, why = with_registry_id(with_framing(records), rule.name, schemas or {})
        if reasons is not None:
            records = reasons.observe(records, final_reason(found, why), schemas or {})
        id_column = bounded(found)
    else:
        id_column = message_id(rule)
    lineage = header(headers.SRC)
    seq = header(headers.SEQ)
    columns = {
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "offset": F.col("offset"),
        "timestamp": F.col("timestamp"),
        "message_id": id_column,
        "key": F.col("key").cast("string"),
        "producer": header(headers.PRODUCER),
        "seq": F.when(seq.rlike(_SEQ), seq.try_cast("bigint")),
        "lineage": lineage,
        "src_topic": F.when(lineage.rlike(SRC_PATTERN), F.regexp_extract(lineage, SRC_PATTERN, 1)),
        "src_partition": _digits(lineage, SRC_PATTERN, 2, "int"),
        "src_offset": _digits(lineage, SRC_PATTERN, 3, "bigint"),
        "committed": F.lit(True),
        # Set by spark_jobs.audit.expected.with_expected when it ran; none filtered else.
        **{
            name: F.col(name) if name in present else F.lit(None)
            for name in ("filtered_by", "filter_undecided_by")
        },
        # Set by spark_jobs.audit.arrivals.with_arrivals from the LSO samples.
        "arrived_at": F.lit(None),
        "arrival_resolution_us": F.lit(None),
    }
    return records.select(
        *(columns[f.name].cast(f.dataType).alias(f.name) for f in FINGERPRINT.fields)
    )
