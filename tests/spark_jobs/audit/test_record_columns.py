"""Fingerprints from Spark Kafka source rows: every id rule, malformed headers as nulls, and
committed/aborted marking, on hand-made rows and on a real transactional topic."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql.types import (
    StructType,
)

from dgm.config.pipelines import MessageIdRule
from spark_jobs.audit.aborted_marking import aborted_offsets, mark_aborted, mark_committed
from spark_jobs.audit.expected import KAFKA_SOURCE
from spark_jobs.audit.record_columns import fingerprints
from spark_jobs.schemas import FINGERPRINT
from tests.support import engine_run
from tests.support.stamped_writes import (
    produce_committed_aborted_and_unidentified,
    wait_for_stable_end,
)

# The columns the Spark Kafka source gives with includeHeaders=true (those fingerprints read).
KAFKA_ROW = StructType([f for f in KAFKA_SOURCE.fields if f.name != "timestampType"])
AT = datetime(2026, 1, 1, tzinfo=UTC)

Header = tuple[str, bytes | None]


def kafka_rows(spark: Any, *records: tuple[bytes | None, bytes | None, list[Header] | None]) -> Any:
    """Source-shaped rows on topic t, partition 0, offsets 0.. in the order given."""
    rows = [(k, v, "t", 0, n, AT, h) for n, (k, v, h) in enumerate(records)]
    return spark.createDataFrame(rows, KAFKA_ROW)


def column(frame: Any, name: str) -> list[Any]:
    return [row[name] for row in frame.orderBy("offset").collect()]


def test_schema_is_the_documented_one(spark: Any) -> None:
    frame = fingerprints(kafka_rows(spark, (None, None, None)), MessageIdRule())
    assert [(f.name, f.dataType) for f in frame.schema.fields] == [
        (f.name, f.dataType) for f in FINGERPRINT.fields
    ]
    first = frame.first()
    assert first is not None
    assert first["committed"] is True  # until mark_committed says otherwise


def test_rows_without_headers_are_refused_with_the_reason(spark: Any) -> None:
    without = kafka_rows(spark, (None, b"v", None)).drop("headers")
    with pytest.raises(ValueError, match=r"missing headers .*includeHeaders=true"):
        fingerprints(without, MessageIdRule())


def test_header_rule_takes_the_last_non_null_value(spark: Any) -> None:
    rows = kafka_rows(
        spark,
        (None, b"v", [("dgm-id", b"first"), ("other", b"x"), ("dgm-id", b"last")]),
        (None, b"v", [("dgm-id", b"kept"), ("dgm-id", None)]),  # a null value is no value
        (None, b"v", [("other", b"x")]),
        (None, b"v", []),
        (None, b"v", None),
        (None, b"v", [("dgm-id", b"")]),  # an empty id is no id
        (None, b"v", [("order-id", b"o-1")]),
    )
    assert column(fingerprints(rows, MessageIdRule("header", "dgm-id")), "message_id") == [
        "last",
        "kept",
        None,
        None,
        None,
        None,
        None,
    ]
    custom = fingerprints(rows, MessageIdRule("header", "order-id"))
    assert column(custom, "message_id") == [None] * 6 + ["o-1"]


def test_json_field_rule_follows_a_dotted_path(spark: Any) -> None:
    rows = kafka_rows(
        spark,
        (None, b'{"order": {"id": "o-7", "n": 1}}', None),
        (None, b'{"order": {"id": 42}}', None),
        (None, b'{"order": {}}', None),
        (None, b'{"id": "top-level"}', None),
        (None, b"not json {", None),
        (None, None, None),
    )
    nested = fingerprints(rows, MessageIdRule("json_field", "order.id"))
    assert column(nested, "message_id") == ["o-7", "42", None, None, None, None]
    top = fingerprints(rows, MessageIdRule("json_field", "id"))
    assert column(top, "message_id") == [None, None, None, "top-level", None, None]


def test_a_json_id_that_is_no_string_or_integer_is_no_id(spark: Any) -> None:
    values = [
        b'{"id": "s"}', b'{"id": 12345678901234567890}', b'{"id": {"a": 1}}', b'{"id": [1]}',
        b'{"id": true}', b'{"id": 1.5}', b'{"id": null}', b'{"other": 1}', b"\xff\xfe",
    ]  # fmt: skip
    rows = kafka_rows(spark, *((None, v, None) for v in values))
    found = column(fingerprints(rows, MessageIdRule("json_field", "id")), "message_id")
    assert found == ["s", "12345678901234567890"] + [None] * 7


def test_ids_that_are_not_utf8_or_huge_stay_distinct_and_small(spark: Any) -> None:
    huge = b"x" * 2_000_000
    rows = kafka_rows(
        spark,
        (b"\xff\x01", b"v", [("dgm-id", b"\xff\x01"), ("big", huge)]),
        (b"\xff\x02", b"v", [("dgm-id", b"\xff\x02")]),
        (None, b"v", [("dgm-id", huge)]),
        (None, b"v", [("dgm-id", huge)]),
    )
    ids = column(fingerprints(rows, MessageIdRule("header", "dgm-id")), "message_id")
    # Replacement characters would make the two ids one: their bytes are kept as hex.
    assert ids[:2] == ["0xFF01", "0xFF02"]
    assert ids[2] == ids[3] == "sha256:" + hashlib.sha256(huge).hexdigest()
    keys = column(fingerprints(rows, MessageIdRule("key", "")), "message_id")
    assert keys[:2] == ["0xFF01", "0xFF02"]


def test_key_rule_reads_the_key_as_text(spark: Any) -> None:
    rows = kafka_rows(spark, (b"k-1", b"v", None), (None, b"v", None), (b"", b"v", None))
    frame = fingerprints(rows, MessageIdRule("key", ""))
    assert column(frame, "message_id") == ["k-1", None, None]
    assert column(frame, "key") == ["k-1", None, ""]


def test_hash_rule_hashes_key_and_value_framed_by_the_key_length(spark: Any) -> None:
    def expected(key: bytes | None, value: bytes | None) -> str:
        framed = f"{-1 if key is None else len(key)}:".encode() + (key or b"") + (value or b"")
        return hashlib.sha256(framed).hexdigest()

    rows = kafka_rows(
        spark,
        (b"a", b"b", None),
        (None, b"ab", None),  # same bytes end to end as the first: must not collide
        (b"a", b"b", [("dgm-id", b"ignored")]),  # same key and value: same hash
        (b"k", None, None),  # a tombstone is identified by its key
        (None, None, None),  # nothing to hash
    )
    ids = column(fingerprints(rows, MessageIdRule("hash", "")), "message_id")
    assert ids == [
        expected(b"a", b"b"),
        expected(None, b"ab"),
        expected(b"a", b"b"),
        expected(b"k", None),
        None,
    ]
    assert ids[0] != ids[1]


def test_audit_headers_parse_and_malformed_ones_become_nulls(spark: Any) -> None:
    def stamped(producer: bytes, seq: bytes, src: bytes) -> tuple[None, bytes, list[Header]]:
        return None, b"v", [("dgm-producer", producer), ("dgm-seq", seq), ("dgm-src", src)]

    rows = kafka_rows(
        spark,
        stamped(b"session-1", b"17", b"orders/3/1234"),
        stamped(b"session-1", b"1.5", b"ns/orders/0/9"),  # a topic may hold '/'
        stamped(b"s", b"-1", b"orders/3/"),
        stamped(b"s", b"abc", b"/3/4"),
        stamped(b"s", b"99999999999999999999", b"orders/99999999999/1"),  # would overflow
        stamped(b"s", b" 5", b"orders/x/1"),
        (None, b"v", None),
    )
    frame = fingerprints(rows, MessageIdRule())
    assert column(frame, "producer") == ["session-1", "session-1", "s", "s", "s", "s", None]
    assert column(frame, "seq") == [17, None, None, None, None, None, None]
    parsed = [
        (r.lineage, r.src_topic, r.src_partition, r.src_offset)
        for r in frame.orderBy("offset").collect()
    ]
    assert parsed == [
        ("orders/3/1234", "orders", 3, 1234),
        ("ns/orders/0/9", "ns/orders", 0, 9),
        ("orders/3/", None, None, None),
        ("/3/4", None, None, None),
        ("orders/99999999999/1", None, None, None),
        ("orders/x/1", None, None, None),
        (None, None, None, None),
    ]


def test_committed_iff_the_read_committed_view_holds_the_coordinates(spark: Any) -> None:
    uncommitted = spark.createDataFrame(
        [
            (None, b"v", topic, p, o, AT, None)
            for topic, p, o in [("t", 0, 0), ("t", 0, 1), ("t", 1, 0), ("u", 0, 0), ("u", 0, 1)]
        ],
        KAFKA_ROW,
    )
    # Repeated coordinates in the committed view must not repeat a record; ("u", 0, 1) is
    # there only in another partition.
    committed = spark.createDataFrame(
        [
            (None, b"v", topic, p, o, AT, None)
            for topic, p, o in [("t", 0, 0), ("t", 0, 0), ("t", 1, 0), ("u", 1, 1)]
        ],
        KAFKA_ROW,
    )
    found = fingerprints(uncommitted, MessageIdRule())
    marked = mark_committed(found, committed)
    assert marked.schema == found.schema
    # The audit's way: the aborted offsets apart, then sent whole to every task.
    broadcast = mark_aborted(found, aborted_offsets(found, committed), broadcast=True)
    assert sorted(broadcast.collect()) == sorted(marked.collect())
    assert sorted((r.topic, r.partition, r.offset, r.committed) for r in marked.collect()) == [
        ("t", 0, 0, True),
        ("t", 0, 1, False),
        ("t", 1, 0, True),
        ("u", 0, 0, False),
        ("u", 0, 1, False),
    ]


@pytest.mark.slow
def test_real_topic_committed_aborted_and_unidentified(spark: Any, kafka: Any) -> None:
    topic = kafka.new_topic("fingerprint")
    produce_committed_aborted_and_unidentified(kafka, topic)
    wait_for_stable_end(kafka, topic)

    def read(isolation: str) -> Any:
        return (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .option("includeHeaders", "true")
            .option("kafka.isolation.level", isolation)
            .load()
        )

    marked = mark_committed(
        fingerprints(read("read_uncommitted"), MessageIdRule()), read("read_committed")
    )
    seen = [
        (r.offset, r.message_id, r.producer, r.seq, r.committed)
        for r in marked.orderBy("offset").collect()
    ]
    # Offsets 3 and 7 are the transactions' control markers: no record, no fingerprint.
    assert seen == [
        (0, "kept-0", "p1", 0, True),
        (1, "kept-1", "p1", 1, True),
        (2, "kept-2", "p1", 2, True),
        (4, "gone-0", "p1", 3, False),
        (5, "gone-1", "p1", 4, False),
        (6, "gone-2", "p1", 5, False),
        (8, None, None, None, True),
        (9, None, None, None, True),
    ]
    summary = engine_run.run(spark, marked).summary()
    assert [
        (s["topic"], s["records"], s["distinct_ids"], s["unidentified"], s["aborted"])
        for s in summary
    ] == [(topic, 5, 3, 2, 3)]
