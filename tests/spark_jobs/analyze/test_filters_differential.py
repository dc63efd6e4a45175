"""Filters and per-side ids, from raw Kafka records: the audit's own expressions (the
`expected` predicate, each side's id rule) and the engine give what the DuckDB reference
computes from the same records with its own JSON functions, and what a plain count says.

Pipeline `f` filters: its source `s` holds JSON orders and heartbeats, and records the
predicate cannot evaluate (no `type` field: undecided, so checked; malformed JSON: undecided
and without an id). Its sink `k` carries the id in the key (sink_message_id = key) while the
source carries it in `$.id` (source_message_id = json_field id).
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dgm.config_schema import AnalysisSettings, DgmConfig, MessageIdRule, PipelineConfig
from spark_jobs.audit.expected import KAFKA_SOURCE, check_predicates, with_expected
from spark_jobs.audit.fingerprint import fingerprints
from spark_jobs.audit.kafka_read import topic_rules
from tests import reference
from tests.spark_jobs.analyze import engine_run
from tests.spark_jobs.analyze.test_loss_differential import assert_same as assert_same_lost

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PREDICATE = "get_json_object(CAST(value AS STRING), '$.type') != 'heartbeat'"
PIPELINE = PipelineConfig(
    name="f",
    source_topics=("s",),
    sink_topics=("k",),
    consumer_group="g",
    declared_semantic="exactly-once",
    expected=PREDICATE,
    source_message_id=MessageIdRule("json_field", "id"),
    sink_message_id=MessageIdRule("key", ""),
)
CONFIG = DgmConfig(
    analysis=AnalysisSettings(window_s=60, grace_s=0.0, min_records=1), pipelines=(PIPELINE,)
)
# The reference's fingerprints of raw records, with DuckDB's JSON functions.
REFERENCE_FINGERPRINTS = """
WITH parsed AS (
    SELECT *, decode(value) AS text, json_valid(decode(value)) AS valid FROM records
), judged AS (
    SELECT *, CASE WHEN valid THEN json_extract_string(text, '$.type') END != 'heartbeat'
              AS keep
    FROM parsed
)
SELECT topic, "partition", "offset", timestamp,
       CASE WHEN topic = 's' AND valid THEN json_extract_string(text, '$.id')
            WHEN topic = 'k' THEN decode(key) END AS message_id,
       decode(key) AS key, NULL::VARCHAR AS producer, NULL::BIGINT AS seq,
       NULL::VARCHAR AS lineage, NULL::VARCHAR AS src_topic, NULL::INTEGER AS src_partition,
       NULL::BIGINT AS src_offset, true AS committed,
       CASE WHEN topic = 's' AND keep = false THEN ['f'] END AS filtered_by,
       CASE WHEN topic = 's' AND keep IS NULL THEN ['f'] END AS filter_undecided_by
FROM judged
"""


class Records:
    """Raw records of `s` and `k` with a known fate per source record."""

    def __init__(self, count: int, seed: int) -> None:
        rng = random.Random(seed)
        self.rows: list[dict[str, Any]] = []
        self.expected: set[str] = set()
        self.filtered = self.undecided = self.duplicates = 0
        self.lost: set[str] = set()
        sink: list[tuple[str, bytes]] = []
        for n in range(count):
            draw, message_id = rng.random(), f"m{n}"
            if draw < 0.02:  # malformed JSON: undecided, no id (unidentified)
                self.add("s", b"{broken " + str(n).encode(), None)
                self.undecided += 1
                continue
            kind = "heartbeat" if draw < 0.15 else None if draw < 0.2 else "order"
            body = {"id": message_id, "n": n} | ({"type": kind} if kind else {})
            value = json.dumps(body).encode()
            self.add("s", value, None)
            if kind == "heartbeat":
                self.filtered += 1
                if rng.random() < 0.05:  # a heartbeat let through: a sink record, no fault
                    sink.append((message_id, value))
                continue
            self.undecided += kind is None
            self.expected.add(message_id)
            if rng.random() < 0.02:
                self.lost.add(message_id)
                continue
            copies = 2 if rng.random() < 0.02 else 1
            self.duplicates += copies - 1
            sink += [(message_id, value)] * copies
        for message_id, value in sink:
            self.add("k", value, message_id.encode())

    def add(self, topic: str, value: bytes, key: bytes | None) -> None:
        offset = sum(1 for r in self.rows if r["topic"] == topic)
        at = T0 + timedelta(milliseconds=10 * len(self.rows))
        self.rows.append(
            {
                "key": key, "value": value, "topic": topic, "partition": 0, "offset": offset,
                "timestamp": at, "timestampType": 0, "headers": [],
            }
        )  # fmt: skip


def audited(spark: Any, records: Records) -> DataFrame:
    """The audit's fingerprints of the raw records: predicate marks, then each topic's rule."""
    raw = spark.createDataFrame(records.rows, KAFKA_SOURCE)
    check_predicates(spark, CONFIG)
    marked = with_expected(raw, CONFIG)
    rules = topic_rules(CONFIG)
    return fingerprints(marked.where(F.col("topic") == "s"), rules["s"]).unionByName(
        fingerprints(marked.where(F.col("topic") == "k"), rules["k"])
    )


def test_filtered_and_rekeyed_pipeline_agrees_with_the_reference_and_the_count(
    spark: Any,
) -> None:
    records = Records(3_000, seed=27)
    frame = audited(spark, records)
    committed = {("f", "s", 0): sum(1 for r in records.rows if r["topic"] == "s")}
    tables = engine_run.run(spark, frame, CONFIG, committed)

    raw = pa.Table.from_pylist(records.rows)
    theirs = reference.query(REFERENCE_FINGERPRINTS, records=raw)
    source, sink = engine_run.of_topics(theirs, "s"), engine_run.of_topics(theirs, "k")
    commits = pa.Table.from_pylist(
        [{"topic": "s", "partition": 0, "committed_offset": committed[("f", "s", 0)]}]
    )
    expected_lost = reference.lost(source, sink, commits, engine_run.FAR, pipeline="f")
    found = assert_same_lost(tables.lost, expected_lost)
    # The plain count: every expected id the sink lacks, nothing filtered.
    assert {r["message_id"] for r in tables.lost} == records.lost and len(found) > 10
    assert (tables.total("filtered"), tables.total("filter_undecided")) == reference.filtered(
        source, "f"
    )
    assert tables.total("filtered") == records.filtered > 300
    assert tables.total("filter_undecided") == records.undecided > 100
    # Checked: the identified, unfiltered source records (undecided ones included).
    assert tables.total("records_checked") == len(records.expected)
    assert tables.total("duplicate_copies") == records.duplicates > 10
