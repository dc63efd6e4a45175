"""watch.ids finds the id the audit finds: Spark's `message_id(rule)` column
(spark_jobs/audit/message_id_columns.py) and the Python twin on the same awkward records, every rule
kind in one Spark job, must agree record by record."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql.types import (
    StructType,
)

from dgm.config.pipelines import MessageIdRule
from spark_jobs.audit.expected import KAFKA_SOURCE
from spark_jobs.audit.message_id_columns import header, message_id
from watch import ids

# The columns of the Spark Kafka source (includeHeaders=true).
KAFKA_ROW = StructType([f for f in KAFKA_SOURCE.fields if f.name != "timestampType"])
Headers = list[tuple[str, bytes | None]] | None
Record = tuple[bytes | None, bytes | None, Headers]

RULES = [
    MessageIdRule("header", "dgm-id"),
    MessageIdRule("json_field", "id"),
    MessageIdRule("json_field", "order.id"),
    MessageIdRule("key"),
    MessageIdRule("hash"),
    # variant_get's other path forms, which a dotted name may hold.
    MessageIdRule("json_field", "items[1].id"),
    MessageIdRule("json_field", "order['id']"),
    MessageIdRule("json_field", 'order["id"]'),
    MessageIdRule("json_field", "order. id"),
    MessageIdRule("json_field", "x-y"),
]
AUDIT_HEADERS = ("dgm-producer", "dgm-seq", "dgm-src")

E = "😀".encode()  # 4 bytes, 1 code point, 2 UTF-16 units
# Invalid UTF-8 where Java's and Python's replacement differ or agree.
BAD_UTF8 = [
    b"\xff", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xed\xbf\xbf",
    b"\xed\xa0", b"\xed\xa0A", b"\xf0\x80\x80\x80", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80",
    b"\xf8\x88\x80\x80\x80", b"\xe2\x82", b"\xe2\x82A", b"\xf0\x9f\x98", b"\xf0\x9f\x98A",
    b"\xf0\x9f", b"\x80\x80", b"\xc3", b"\xc3\xc3\xa9", b"\xe2(\xa1", b"\xf0(\x8c\xbc",
]  # fmt: skip
# JSON values put where the id rules look: numbers at the edges of Spark's types, strings
# with escapes and invalid bytes, and everything that is no id.
TOKENS = [
    b"0", b"-0", b"1", b"-1", b"9223372036854775807", b"9223372036854775808",
    b"-9223372036854775808", b"-9223372036854775809", b"99999999999999999999",
    b"1" * 38, b"-" + b"9" * 38, b"1" * 39, b"1" * 1000, b"-" + b"1" * 1000, b"1" * 1001,
    b"1.0", b"-1.0", b"-0.0", b"0.000", b"10.00", b"1.5", b"12.30", b"100.0", b"-100.00",
    b"1000000000000000000000.000", b"123456789012345678901234567890.0",
    b"1" * 37 + b".0", b"1" * 38 + b".0", b"1" * 38 + b".5", b"1.0" + b"0" * 36,
    b"1.0" + b"0" * 37, b"0." + b"0" * 38, b"0." + b"0" * 39, b"1." + b"1" * 998,
    b"1." + b"1" * 999, b"1." + b"1" * 997 + b"e12", b"1." + b"1" * 997 + b"e123",
    b"1e3", b"1E2", b"-1e0", b"1e400", b"1e-400", b"0e0", b"1.0e30", b"100e-2",
    b"NaN", b"Infinity", b"-Infinity", b"01", b"-01", b"1.", b".5", b"+1", b"0x10", b"1.5e",
    b"--1", b"-", b"000",
    b'""', b'"  "', b'"abc"', b'"\\u00e9\\ud83d\\ude00"', b'"\\ud800"', b'"\\udc00\\ud800"',
    b'"\\ud83dx"', b'"a\\u0000b"', b'"x\\/y\\n"', b'"\t"', b'"\\u00"', b'"\\x"', b"'s'",
    '"é"'.encode(), b'"' + E + b'"', b'"\x7f"', b'"1"', b'"' + b"a" * 1024 + b'"',
    b'"' + b"a" * 1025 + b'"', b'"' + b"a" * 1023 + E + b'"', b'"' + E * 1025 + b'"',
    b'"' + b"\\u00e9" * 1025 + b'"', b'"' + b"\\ud800" * 1025 + b'"',
    b"null", b"true", b"false", b"[1]", b"[]", b"{}", b'{"id": 1}',
    *(b'"<' + bad + b'>"' for bad in BAD_UTF8),
]  # fmt: skip


def nested(depth: int) -> bytes:
    return b'{"id": 1, "order": {"id": 2}, "x": ' + b"[" * depth + b"]" * depth + b"}"


# Whole documents: blanks, trailing text, duplicates, the places a path can go wrong, and
# Jackson's limits (nesting, number and name lengths).
DOCUMENTS = [
    b"", b" ", b"null", b"1", b'"s"', b"[]", b'[{"id": 1}]', b'  {"id": 5}  ',
    b'\t\n\r {"id": 7}\n', b'\x0c{"id": 7}', b'\xef\xbb\xbf{"id": 1}', b'\xa0{"id": 1}',
    b'{"id": 1} x', b'{"id": 1}{"id": 2}', b'{"id": 1}\x00', b'{"id": 1}}', b'{"id": 1}, 3',
    b'{"id": 1, \xff}', b'{"x": "\xff", "id": 2}', b'{"id": 1, "id": 2}', b'{"id": "a", "id": 3}',
    b'{"id": 1, "x": {"a": 1, "a": 2}}', b'{"id": 1, "x": [{"a": 1, "a": 2}]}',
    b'{"id": 1, "\\u0069d": 2}', b'{"id": 1,}', b"{'id': 1}", b'{"ID": 1}', b'{"id" 1}',
    b'{"id": 1', b'{"order": {"id": 1, "id": 2}}', b'{"order": null}', b'{"order": [{"id": 1}]}',
    b'{"order": {"id": {"id": 1}}}', b'{"order.id": 4}', b'{"order": {" id": 8, "id ": 9}}',
    b'{"items": [{"id": 1}]}', b'{"items": {"1": {"id": 3}}}', b'{"items": [0, {"id": 5}, 6]}',
    b'{"items": [0, [{"id": 5}]]}', b'{"x-y": "dash"}', b'{"x-y": 1, "x-y": 2}',
    b'{"\\ud800": 1, "\\udc00": 2, "id": 3}', b'{"order": {"\\u0069\\u0064": "esc"}}',
    b'{"id": 1} // comment', b'{"id": /* c */ 1}', b'{"id": 1}\n{"id": 2}',
    nested(998), nested(999), nested(1000), nested(1500),
    b'{"id": 1, "order": ' + b'{"a": ' * 998 + b"1" + b"}" * 998 + b"}",
    b'{"id": 1, "order": ' + b'{"a": ' * 999 + b"1" + b"}" * 999 + b"}",
    b'{"id": 1, "' + b"k" * 50000 + b'": 1}', b'{"id": 1, "' + b"k" * 50001 + b'": 1}',
    b'{"id": 1, "' + b"k" * 49999 + b'\\u006b": 1}',
    b'{"id": 1, "' + b"k" * 50000 + b'\\u006b": 1}',
    b'{"id": 1, "' + E * 25000 + b'": 1}', b'{"id": 1, "' + E * 25001 + b'": 1}',
    b'{"id": 1, "' + E * 24999 + b'kk": 1}', b'{"id": 1, "' + E * 24999 + b'kkk": 1}',
]  # fmt: skip

KEYS = [
    None, b"", b"k", b"\xff\xfe", b"\xed\xa0\x80", "é".encode(), b"a" * 1024, b"a" * 1025,
    E * 300, "é".encode() * 1024, "é".encode() * 1025, b"\x00",
]  # fmt: skip
HEADER_LISTS: list[Headers] = [
    None,
    [],
    [("dgm-id", None)],
    [("dgm-id", b"a"), ("dgm-id", b"b")],
    [("dgm-id", b"a"), ("dgm-id", None)],
    [("dgm-id", None), ("dgm-id", b"a"), ("other", b"z")],
    [("dgm-id", b"")],
    [("dgm-id", b"\xff")],
    [("dgm-id", b"\xed\xa0\x80")],
    [("DGM-ID", b"x")],
    [("dgm-id ", b"x")],
    [("dgm-id", b"a" * 1024)],
    [("dgm-id", b"a" * 1025)],
    [("dgm-id", b"\xff" * 600)],  # 0x + 1200 hex digits: a digest
    [("dgm-id", E * 1025)],
    [("dgm-id", b"x"), ("dgm-producer", b"p-1"), ("dgm-seq", b"41"), ("dgm-src", b"t/0/5")],
    [("dgm-producer", b"\xfe"), ("dgm-seq", None), ("dgm-seq", b""), ("dgm-src", b"a/b/c")],
]


def handmade() -> list[Record]:
    records: list[Record] = []
    for token in TOKENS:
        records.append(
            (
                None,
                b'{"id": %s, "order": {"id": %s}, "items": [{}, {"id": %s}], "x-y": %s}'
                % (token, token, token, token),
                None,
            )
        )
        # Where no rule looks: a token Spark refuses spoils the whole document.
        records.append((None, b'{"id": 1, "order": {"id": 2}, "x": [%s]}' % token, None))
    records += [(None, document, None) for document in DOCUMENTS]
    records += [(key, None, None) for key in KEYS]
    records += [(key, b"v", None) for key in KEYS]
    records += [(b"k", b"", None), (b"", b"", None), (None, b"", None), (b"ab", None, None)]
    records += [(b"k", b'{"id": 1}', headers) for headers in HEADER_LISTS]
    records += [(b"a", b"b", None), (None, b"ab", None)]  # different hashes
    return records


PIECES = [
    b"a", b"id", b"Z", b"\\u00e9", b"\\ud83d\\ude00", b"\\ud800", b"\\udfff", b"\\ude00",
    "é".encode(), E, b"\\n", b'\\"', b"\\\\", b"\\/", b"\t", b"\x7f", b"\\u0000", b" ",
    *BAD_UTF8,
]  # fmt: skip


def random_number(rng: random.Random) -> bytes:
    if rng.random() < 0.05:
        return rng.choice([b"NaN", b"01", b"1.", b"-", b"+1", b"Infinity"])
    whole = rng.choice([b"0", b"1", b"9"]) if rng.random() < 0.3 else b""
    if not whole:
        count = rng.choice([1, 2, 18, 19, 20, 37, 38, 39, 40, rng.randint(1, 45)])
        whole = str(rng.randint(1, 9)).encode() + bytes(rng.choices(b"0123456789", k=count - 1))
    token = rng.choice([b"", b"-"]) + whole
    if rng.random() < 0.5:
        digits = rng.choice([0, 1, 2, 36, 37, 38, 39, rng.randint(1, 42)])
        zeros = rng.random() < 0.5  # trailing zeros make integral decimals
        token += b"." + (b"0" * digits if zeros else bytes(rng.choices(b"0123456789", k=digits)))
        if not digits:
            token += b"0"
    if rng.random() < 0.15:
        token += rng.choice([b"e", b"E"]) + rng.choice([b"", b"-", b"+"])
        token += str(rng.randint(0, 400)).encode()
    return token


def random_string(rng: random.Random) -> bytes:
    return b'"' + b"".join(rng.choices(PIECES, k=rng.randint(0, 6))) + b'"'


def random_json(rng: random.Random, depth: int = 0) -> bytes:
    roll = rng.random()
    if depth > 3 or roll < 0.35:
        return random_number(rng)
    if roll < 0.65:
        return random_string(rng)
    if roll < 0.72:
        return rng.choice([b"null", b"true", b"false"])
    if roll < 0.85:
        items = [random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
        return b"[" + b", ".join(items) + b"]"
    return random_object(rng, depth + 1)


def random_object(rng: random.Random, depth: int = 0) -> bytes:
    names = [b'"id"', b'"order"', b'"items"', b'"x-y"', b'"ID"', b'" id"']
    fields = []
    for _ in range(rng.randint(0, 4)):
        name = rng.choice(names) if rng.random() < 0.85 else random_string(rng)
        fields.append(name + b": " + random_json(rng, depth))
    if rng.random() < 0.4:  # an id to find, nested under order
        fields.insert(0, b'"order": {"id": ' + random_json(rng, 3) + b"}")
    if rng.random() < 0.6:
        fields.insert(rng.randint(0, len(fields)), b'"id": ' + random_json(rng, 3))
    return b"{" + b", ".join(fields) + b"}"


def mutate(rng: random.Random, data: bytes) -> bytes:
    at = rng.randint(0, len(data))
    return data[:at] + bytes([rng.randint(0, 255)]) * rng.randint(0, 2) + data[at + 1 :]


def random_headers(rng: random.Random) -> Headers:
    if rng.random() < 0.2:
        return None
    names = ["dgm-id", "dgm-producer", "dgm-seq", "dgm-src", "other"]
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(rng.randint(0, 4)):
        value = rng.choice([None, b"", b"x", b"42", b"t/0/5", rng.randbytes(rng.randint(1, 4))])
        headers.append((rng.choice(names), value))
    return headers


def generated(seed: int, count: int) -> list[Record]:
    rng = random.Random(seed)
    records: list[Record] = []
    for _ in range(count):
        key = rng.choice([None, b"", b"k", rng.randbytes(rng.randint(0, 6))])
        roll = rng.random()
        if roll < 0.05:
            value = None
        elif roll < 0.12:
            value = rng.randbytes(rng.randint(0, 12))
        else:
            value = random_object(rng)
            if roll > 0.85:
                value = mutate(rng, value)
        records.append((key, value, random_headers(rng)))
    return records


def spark_ids(spark: Any, records: list[Record]) -> list[tuple[Any, ...]]:
    """Per record: the id of each rule, then each audit header's text, from one Spark job."""
    at = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [(k, v, "t", 0, n, at, h) for n, (k, v, h) in enumerate(records)]
    frame = spark.createDataFrame(rows, KAFKA_ROW)
    columns = [message_id(rule).alias(f"rule{i}") for i, rule in enumerate(RULES)]
    columns += [header(name).alias(name) for name in AUDIT_HEADERS]
    found = frame.select("offset", *columns).orderBy("offset").collect()
    return [tuple(row)[1:] for row in found]


def python_ids(record: Record) -> tuple[Any, ...]:
    key, value, headers = record
    found = [ids.message_id(rule, key, value, headers) for rule in RULES]
    return (*found, *(ids.header_text(headers, name) for name in AUDIT_HEADERS))


def test_python_finds_the_ids_spark_finds(spark: Any) -> None:
    records = handmade() + generated(seed=20260101, count=600)
    expected = spark_ids(spark, records)
    assert len(expected) == len(records)
    labels = [*(f"{r.kind}:{r.name}" for r in RULES), *AUDIT_HEADERS]
    differences = [
        (labels[i], record[0], record[1] if record[1] is None else record[1][:200], want, got)
        for record, wanted in zip(records, expected, strict=True)
        for i, (want, got) in enumerate(zip(wanted, python_ids(record), strict=True))
        if want != got
    ]
    assert differences == []
    # The records reach every kind of outcome, not only none.
    assert {type(found) for row in expected for found in row} == {str, type(None)}


@pytest.mark.parametrize(
    "name",
    ["[", "a..b", ".x", "items[ 0 ].id", "order[ 'id' ]", "items[-1].id", "items[99999999999]"],
)
def test_a_path_spark_refuses_is_refused(name: str) -> None:
    """Spark fails the audit on these (INVALID_VARIANT_GET_PATH, or the index overflowing an
    int); the watch must not quietly find other ids."""
    with pytest.raises(ValueError, match="not a JSON path"):
        ids.message_id(MessageIdRule("json_field", name), None, b"{}", None)


def test_strings_beyond_jacksons_limit_are_no_json() -> None:
    # Probed on Spark 4.0 once (too big for every run): a string of 20,000,000 UTF-16 units
    # parses, one more does not; an emoji counts twice.
    rule = MessageIdRule("json_field", "id")
    for filler, fits in [
        (b"a" * 20_000_000, True),
        (b"a" * 20_000_001, False),
        (E * 10_000_000, True),
        (E * 10_000_001, False),
    ]:
        value = b'{"id": 1, "x": "' + filler + b'"}'
        assert ids.message_id(rule, None, value, None) == ("1" if fits else None)
