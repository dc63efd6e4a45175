"""The compact fingerprint audit keeps per Kafka record, built with JVM-native columns only.

`fingerprints` turns rows of the Spark Kafka source (key, value, topic, partition, offset,
timestamp, headers) into FINGERPRINT rows; `mark_committed` sets `committed` by comparing the
read_uncommitted view of an offset range with the read_committed view of the same range.
No Python UDF runs per record: header lookups, JSON paths, hashing and parsing are all
Catalyst expressions, so the work stays in the JVM.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dgm.config.pipelines import MessageIdRule
from dgm.contracts import headers
from dgm.contracts.fingerprints import COORDINATES
from spark_jobs.schemas import FINGERPRINT

# What fingerprints() reads from a Spark Kafka source row.
KAFKA_COLUMNS = ("key", "value", *COORDINATES, "timestamp", "headers")

# Digit runs short enough for their type, so the casts below can never overflow.
_SEQ = r"^[0-9]{1,18}$"
# Like dgm.contracts.headers.parse_src: a non-empty topic (which may hold '/'), then two numbers.
_SRC = r"^(.+)/([0-9]{1,9})/([0-9]{1,18})$"


def header(name: str) -> Column:
    """The text of header `name`: the last non-null value when it repeats (as header_map)."""
    matching = F.filter("headers", lambda h: (h["key"] == F.lit(name)) & h["value"].isNotNull())
    # try_element_at: null for an empty (or null) array even under ANSI mode.
    return _text(F.try_element_at(matching, F.lit(-1))["value"])


def json_path(dotted: str) -> str:
    """`order.id` as the JSON path get_json_object takes: `$.order.id`."""
    return "$." + dotted


def message_id(rule: MessageIdRule) -> Column:
    """The id column for `rule`; an empty id counts as none."""
    if rule.kind == "header":
        found = header(rule.name)
    elif rule.kind == "json_field":
        found = _json_id(json_path(rule.name))
    elif rule.kind == "key":
        found = _text(F.col("key"))
    elif rule.kind == "hash":
        found = _key_value_hash()
    else:
        raise ValueError(f"unknown message id kind {rule.kind!r}")
    # An empty id is none; a huge one (a header of megabytes) is kept as its digest.
    return F.when(found != F.lit(""), _bounded(found))


# Longer ids are stored as "sha256:<digest>": fingerprints stay small, equal ids stay equal.
MAX_ID_CHARS = 1024


def _bounded(found: Column) -> Column:
    digest = F.concat(F.lit("sha256:"), F.sha2(F.encode(found, "UTF-8"), 256))
    return F.when(F.length(found) > MAX_ID_CHARS, digest).otherwise(found)


def _json_id(path: str) -> Column:
    """The id at `path` when it is a JSON string or integer; invalid JSON, a missing field, an
    object, array, boolean, fraction or null is no id (the record counts as unidentified)."""
    parsed = F.try_parse_json(F.col("value").cast("string"))
    kind = F.schema_of_variant(F.variant_get(parsed, path, "variant"))
    integral = kind.isin("STRING", "TINYINT", "SMALLINT", "INT", "BIGINT") | kind.rlike(
        r"^DECIMAL\([0-9]+,0\)$"
    )
    return F.when(integral, F.variant_get(parsed, path, "string"))


def _text(raw: Column) -> Column:
    """Bytes as text: UTF-8 as it is, anything else as 0x<hex> (never two ids made one by
    replacement characters)."""
    text = raw.cast("string")
    return F.when(F.is_valid_utf8(text), text).otherwise(F.concat(F.lit("0x"), F.hex(raw)))


def _key_value_hash() -> Column:
    # The key's length goes first so (key "a", value "b") and (no key, value "ab") differ.
    key, value = F.col("key"), F.col("value")
    key_length = F.coalesce(F.length(key), F.lit(-1))
    framed = F.concat(
        F.encode(F.format_string("%d:", key_length), "UTF-8"),
        F.coalesce(key, F.lit(b"")),
        F.coalesce(value, F.lit(b"")),
    )
    # A record with neither key nor value carries nothing to identify it by.
    return F.when(key.isNotNull() | value.isNotNull(), F.sha2(framed, 256))


def _digits(text: Column, pattern: str, group: int, to: str) -> Column:
    part = F.regexp_extract(text, pattern, group)
    return F.when(text.rlike(pattern), part.try_cast(to))


def fingerprints(records: DataFrame, rule: MessageIdRule) -> DataFrame:
    """FINGERPRINT rows from Spark Kafka source rows (read with includeHeaders=true).

    `committed` starts true: a read of a topic that never saw a transaction needs no second
    view. Where the topic has seen transactions, pass the result to `mark_committed`.
    """
    present = set(records.columns)  # one schema request to the JVM, not one per name
    missing = [name for name in KAFKA_COLUMNS if name not in present]
    if missing:
        raise ValueError(
            f"fingerprints need the Spark Kafka source's columns, missing {', '.join(missing)}"
            " (headers come only with includeHeaders=true)"
        )
    lineage = header(headers.SRC)
    seq = header(headers.SEQ)
    columns = {
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "offset": F.col("offset"),
        "timestamp": F.col("timestamp"),
        "message_id": message_id(rule),
        "key": F.col("key").cast("string"),
        "producer": header(headers.PRODUCER),
        "seq": F.when(seq.rlike(_SEQ), seq.try_cast("bigint")),
        "lineage": lineage,
        "src_topic": F.when(lineage.rlike(_SRC), F.regexp_extract(lineage, _SRC, 1)),
        "src_partition": _digits(lineage, _SRC, 2, "int"),
        "src_offset": _digits(lineage, _SRC, 3, "bigint"),
        "committed": F.lit(True),
        # Set by spark_jobs.audit.expected.with_expected when it ran; none filtered else.
        **{
            name: F.col(name) if name in present else F.lit(None)
            for name in ("filtered_by", "filter_undecided_by")
        },
    }
    return records.select(
        *(columns[f.name].cast(f.dataType).alias(f.name) for f in FINGERPRINT.fields)
    )


def aborted_offsets(uncommitted_view: DataFrame, committed_view: DataFrame) -> DataFrame:
    """The coordinates (topic, partition, offset) of `uncommitted_view` (a read_uncommitted
    read's rows) that `committed_view` (a read_committed read of the same ranges, any columns
    with the coordinates) does not hold: the aborted records. An anti join of the coordinates
    alone, so only those are shuffled, and each record is kept once however the committed
    view repeats it."""
    coordinates = list(COORDINATES)
    return uncommitted_view.select(*coordinates).join(
        committed_view.select(*coordinates), coordinates, "left_anti"
    )


def mark_aborted(uncommitted_view: DataFrame, aborted: DataFrame, broadcast: bool) -> DataFrame:
    """`uncommitted_view` (fingerprints) with `committed` false for the records `aborted`
    (aborted_offsets, each once) names and true for the others. `broadcast`: `aborted` is
    small enough to send whole to every task, so the fingerprints are not shuffled."""
    flagged = aborted.select(*COORDINATES).withColumn("_aborted", F.lit(True))
    marked = uncommitted_view.drop("committed").join(
        F.broadcast(flagged) if broadcast else flagged, list(COORDINATES), "left"
    )
    committed = F.col("_aborted").isNull().alias("committed")
    return marked.select(
        *(committed if f.name == "committed" else f.name for f in FINGERPRINT.fields)
    )


def mark_committed(uncommitted_view: DataFrame, committed_view: DataFrame) -> DataFrame:
    """`uncommitted_view` (fingerprints of a read_uncommitted read) with `committed` set: true
    iff the record's (topic, partition, offset) is in `committed_view`, a read_committed read
    of the same range. One plan, no broadcast: the audit materializes the aborted offsets
    first to choose (fingerprinted.fingerprinted)."""
    return mark_aborted(
        uncommitted_view, aborted_offsets(uncommitted_view, committed_view), broadcast=False
    )


# Offsets per bucket of the range join in mark_aborted_spans: a span is listed once per bucket
# it covers, a record looks up its own bucket only.
SPAN_BUCKET = 4096


def mark_aborted_spans(uncommitted_view: DataFrame, spans: DataFrame) -> DataFrame:
    """`uncommitted_view` (fingerprints) with `committed` false for the records inside
    `spans` (topic, partition, first, last: aborted batches' offsets, inclusive, never
    overlapping; spark_jobs/audit/aborted_batches.py) and unchanged for the others. The spans
    are few (a batch each) and sent whole to every task: a hash join on (topic, partition,
    offset bucket), then the offset tested against the span; at most one span holds it."""
    bucket = F.floor(F.col("offset") / SPAN_BUCKET)
    listed = spans.select(
        F.col("topic").alias("_topic"),
        F.col("partition").alias("_partition"),
        F.explode(
            F.sequence(F.floor(F.col("first") / SPAN_BUCKET), F.floor(F.col("last") / SPAN_BUCKET))
        ).alias("_span_bucket"),
        F.col("first").alias("_first"),
        F.col("last").alias("_last"),
    )
    marked = uncommitted_view.withColumn("_bucket", bucket).join(
        F.broadcast(listed),
        (F.col("topic") == F.col("_topic"))
        & (F.col("partition") == F.col("_partition"))
        & (F.col("_bucket") == F.col("_span_bucket"))
        & F.col("offset").between(F.col("_first"), F.col("_last")),
        "left",
    )
    committed = (F.col("committed") & F.col("_first").isNull()).alias("committed")
    return marked.select(
        *(committed if f.name == "committed" else f.name for f in FINGERPRINT.fields)
    )
