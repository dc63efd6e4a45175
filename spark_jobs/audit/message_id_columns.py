"""The message id rules as Spark columns over the Spark Kafka source's rows: the rules of
dgm/contracts/message_ids.py as Catalyst expressions, so finding ids stays in the JVM (no
Python UDF per record). watch/ids.py is their Python twin; tests/watch/test_ids.py holds the
two equal on awkward records.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from dgm.config.pipelines import MessageIdRule
from dgm.contracts.message_ids import (
    DIGEST_PREFIX,
    HEX_PREFIX,
    JSON_ID_DECIMAL,
    JSON_ID_TYPES,
    MAX_ID_CHARS,
    NO_KEY_LENGTH,
)


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
    elif rule.kind == "registry_field":
        # Needs the batch's schemas: record_columns.fingerprints reads it with
        # registry_columns.with_registry_id and passes the result to `bounded`.
        raise ValueError("registry_field ids come from registry_columns.with_registry_id")
    else:
        raise ValueError(f"unknown message id kind {rule.kind!r}")
    return bounded(found)


def bounded(found: Column) -> Column:
    """An empty id is none; a huge one (a header of megabytes) is kept as its digest."""
    return F.when(found != F.lit(""), _bounded(found))


def _bounded(found: Column) -> Column:
    digest = F.concat(F.lit(DIGEST_PREFIX), F.sha2(F.encode(found, "UTF-8"), 256))
    return F.when(F.length(found) > MAX_ID_CHARS, digest).otherwise(found)


def _json_id(path: str) -> Column:
    """The id at `path` when it is a JSON string or integer; invalid JSON, a missing field, an
    object, array, boolean, fraction or null is no id (the record counts as unidentified)."""
    parsed = F.try_parse_json(F.col("value").cast("string"))
    kind = F.schema_of_variant(F.variant_get(parsed, path, "variant"))
    is_id = kind.isin(*JSON_ID_TYPES) | kind.rlike(JSON_ID_DECIMAL)
    return F.when(is_id, F.variant_get(parsed, path, "string"))


def _text(raw: Column) -> Column:
    """Bytes as text: UTF-8 as it is, anything else as 0x<hex> (never two ids made one by
    replacement characters)."""
    text = raw.cast("string")
    return F.when(F.is_valid_utf8(text), text).otherwise(F.concat(F.lit(HEX_PREFIX), F.hex(raw)))


def _key_value_hash() -> Column:
    # The key's length goes first so (key "a", value "b") and (no key, value "ab") differ.
    key, value = F.col("key"), F.col("value")
    key_length = F.coalesce(F.length(key), F.lit(NO_KEY_LENGTH))
    framed = F.concat(
        F.encode(F.format_string("%d:", key_length), "UTF-8"),
        F.coalesce(key, F.lit(b"")),
        F.coalesce(value, F.lit(b"")),
    )
    # A record with neither key nor value carries nothing to identify it by.
    return F.when(key.isNotNull() | value.isNotNull(), F.sha2(framed, 256))
