"""The audit headers' values read alike by every reader of dgm/contracts/message_ids.py's
rules: the audit's Spark columns (spark_jobs/audit/record_columns.py) against the watch's
dgm-seq (watch/ids.py) and the core's dgm-src (`headers.parse_src`), on awkward values, in
one Spark job."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime
from typing import Any

from pyspark.sql.types import StructType

from dgm.config.pipelines import MessageIdRule
from dgm.contracts.headers import SEQ, SRC, format_src, parse_src
from spark_jobs.audit.expected import KAFKA_SOURCE
from spark_jobs.audit.record_columns import fingerprints
from watch.ids import header_text, seq_number

KAFKA_ROW = StructType([f for f in KAFKA_SOURCE.fields if f.name != "timestampType"])
# Every line terminator Java's regex knows, where the patterns may meet them.
ENDS = ["\n", "\r", "\r\n", "\x85", "\u2028", "\u2029"]
SEQS = [
    "0", "41", "0041", "9" * 18, "1" * 19, "", " 41", "41 ", "+41", "-1", "4.1", "4e1", "x",
    "٣", "41٣", "\t41", "41\t", "\n41", *(f"41{end}" for end in ENDS), "41\n\n", "41\r\r",
]  # fmt: skip
SRCS = [
    format_src("orders", 3, 1234), format_src("with/slash", 0, 0), format_src("é😀", 9, 5),
    "t/0/5", "a/b/0/5", "t//0/5", "//0/5", "t/00/05", "t/123456789/5", "t/1234567890/5",
    "t/0/" + "9" * 18, "t/0/" + "9" * 19, "", "t", "t/0", "/0/5", "t/0/5/", "t/x/5", "t/-1/5",
    "t/0/-5", "t/٣/5", "t/0/٣", " t/0/5", "t/0/5 ", "t/ 0/5", "t/0/5\t", "t\t/0/5",
    *(f"t{end}/0/5" for end in ENDS), *(f"t/0/5{end}" for end in ENDS),
    *(f"t/0{end}/5" for end in ENDS), *(f"{end}t/0/5" for end in ENDS), "t/0/5\n\n",
    "t/0/5\r\r",
]  # fmt: skip
# Java's `$` passes one line terminator ending the text and the audit's cast trims it, where
# the watch's fullmatch does not (message_ids.SEQ_DIGITS): kept as each reader had it.
SEQ_ONLY_THE_AUDIT_READS = re.compile("[0-9]{1,18}(?:\r\n|\n|\r)")


def awkward(rng: random.Random, pieces: list[str], count: int) -> list[str]:
    return ["".join(rng.choices(pieces, k=rng.randint(0, 7))) for _ in range(count)]


def spark_reads(spark: Any, values: list[bytes | None]) -> list[tuple[Any, ...]]:
    """Per value, sent as both headers: the fingerprint's seq, src_topic, src_partition and
    src_offset."""
    at = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [
        (None, b"v", "t", 0, n, at, [(SEQ, value), (SRC, value)]) for n, value in enumerate(values)
    ]
    found = fingerprints(spark.createDataFrame(rows, KAFKA_ROW), MessageIdRule())
    columns = ("seq", "src_topic", "src_partition", "src_offset")
    return [tuple(r)[1:] for r in found.select("offset", *columns).orderBy("offset").collect()]


def python_src(value: bytes | None) -> tuple[str, int, int] | tuple[None, None, None]:
    if value is None:
        return None, None, None
    try:
        return parse_src(value)
    except ValueError:  # UnicodeDecodeError too: the audit's 0x<hex> text is no dgm-src
        return None, None, None


def test_the_watch_and_the_core_read_the_headers_the_audit_reads(spark: Any) -> None:
    rng = random.Random(20260301)
    texts = [
        *SEQS,
        *SRCS,
        *awkward(rng, ["4", "1", "0", " ", "\n", "\r", "+", "x"], 300),
        *awkward(rng, ["t", "/", "0", "9", "12345678", "\n", "\r", "\u2028", "٣", "é", " "], 500),
    ]
    values: list[bytes | None] = [None, b"\xff/0/5", b"t/0/\xed\xa0\x80", b"\xff"]
    values += [text.encode() for text in texts]
    audit = spark_reads(spark, values)
    seqs_apart, srcs_apart, audit_only = set(), set(), set()
    for value, (seq, *src) in zip(values, audit, strict=True):
        text = header_text([(SEQ, value)], SEQ)
        if seq_number(text) != seq:
            seqs_apart.add(text)
        if text is not None and SEQ_ONLY_THE_AUDIT_READS.fullmatch(text):
            audit_only.add(text)
        if python_src(value) != tuple(src):
            srcs_apart.add(value)
    assert "41\r\n" in audit_only
    assert seqs_apart == audit_only
    assert srcs_apart == set()
    # The values reach every outcome, not only none.
    assert {s is None for s, *_ in audit} == {True, False}
    assert {t is None for _, t, *_ in audit} == {True, False}
