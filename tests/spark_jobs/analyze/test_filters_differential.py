"""Filters and per-side ids, from raw Kafka records: the audit's own expressions (the
`expected` predicate, each side's id rule) and the engine give what the DuckDB reference
computes from the same records with its own JSON functions, and what a plain count says.

Pipeline `f` filters: its source `s` holds JSON orders and heartbeats, and records the
predicate cannot evaluate (no `type` field: undecided, so checked; malformed JSON: undecided
and without an id). Its sink `k` carries the id in the key (sink_message_id = key) while the
source carries it in `$.id` (source_message_id = json_field id).

The same pipeline judged by a deadline (claim = "deadline") over two cycles of one engine: a
heartbeat is never expected in the sink, so one missing from it is never lost and one let
through later than max_delay is never a late record; expected records are lost or late as the
reference and a plain count say.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dgm.config.analysis import AnalysisSettings
from dgm.config.document import DgmConfig
from dgm.config.pipelines import MessageIdRule, PipelineConfig
from dgm.contracts.vocabulary import LossCause
from spark_jobs.analysis_input import Fingerprints
from spark_jobs.analyze.engine import Engine
from spark_jobs.audit.expected import KAFKA_SOURCE, check_predicates, with_expected
from spark_jobs.audit.id_rules import topic_rules
from spark_jobs.audit.record_columns import fingerprints
from tests.support import engine_run, reference
from tests.support.deadline_comparison import assert_agree
from tests.support.lost_comparison import assert_same as assert_same_lost

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


def audited(spark: Any, rows: list[dict[str, Any]], config: DgmConfig = CONFIG) -> DataFrame:
    """The audit's fingerprints of raw records: predicate marks, then each topic's rule;
    worked out once (the engine's many jobs would each convert the Python rows again)."""
    raw = spark.createDataFrame(rows, KAFKA_SOURCE)
    check_predicates(spark, config)
    marked = with_expected(raw, config)
    rules = topic_rules(config)
    found = fingerprints(marked.where(F.col("topic") == "s"), rules["s"]).unionByName(
        fingerprints(marked.where(F.col("topic") == "k"), rules["k"])
    )
    materialized: DataFrame = spark.createDataFrame(found.toArrow())
    return materialized


def test_filtered_and_rekeyed_pipeline_agrees_with_the_reference_and_the_count(
    spark: Any,
) -> None:
    records = Records(3_000, seed=27)
    frame = audited(spark, records.rows)
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


MAX_DELAY = timedelta(seconds=5)
BY_DEADLINE = replace(PIPELINE, consumer_group="", claim="deadline", max_delay="5s")
DEADLINE_CONFIG = replace(CONFIG, pipelines=(BY_DEADLINE,))


def sent_at(records: Records) -> dict[str, datetime]:
    """Source id ($.id) -> its record's timestamp."""
    found = {}
    for r in records.rows:
        if r["topic"] == "s" and not r["value"].startswith(b"{broken"):
            found[json.loads(r["value"])["id"]] = r["timestamp"]
    return found


def heartbeats(records: Records) -> set[str]:
    return {
        body["id"]
        for r in records.rows
        if r["topic"] == "s" and not r["value"].startswith(b"{broken")
        if (body := json.loads(r["value"])).get("type") == "heartbeat"
    }


def retimed(records: Records, rng: random.Random) -> list[dict[str, Any]]:
    """The records with their sink copies rewritten: 1 s after the source record in sink
    partition 0, or (a few expected ids, and every heartbeat let through) max_delay + 2 s
    after it, in partition 1 in timestamp order, so each partition's copies are timestamped
    in offset order."""
    sent, dropped = sent_at(records), heartbeats(records)
    timely: list[dict[str, Any]] = []
    late: list[dict[str, Any]] = []
    for r in records.rows:
        if r["topic"] == "k":
            message_id = r["key"].decode()
            tardy = message_id in dropped or rng.random() < 0.03
            after = MAX_DELAY + timedelta(seconds=2) if tardy else timedelta(seconds=1)
            (late if tardy else timely).append(r | {"timestamp": sent[message_id] + after})
    late.sort(key=lambda r: r["timestamp"])
    sink = [
        r | {"partition": partition, "offset": offset}
        for partition, copies in enumerate((timely, late))
        for offset, r in enumerate(copies)
    ]
    return [r for r in records.rows if r["topic"] == "s"] + sink


def by_plain_count(
    records: Records, rows: list[dict[str, Any]], now: datetime
) -> tuple[set[str], set[str]]:
    """(lost ids, late ids) of the deadline pipeline at `now` over the records written by
    then, counted in plain Python: expected ids older than max_delay without a sink copy, and
    those whose first copy is later than their record + max_delay."""
    sent = sent_at(records)
    first: dict[str, datetime] = {}
    for r in rows:
        if r["topic"] == "k" and r["timestamp"] < now:
            message_id = r["key"].decode()
            first[message_id] = min(first.get(message_id, r["timestamp"]), r["timestamp"])
    checked = {i for i in records.expected if sent[i] < now - MAX_DELAY}
    late = {i for i in checked & set(first) if first[i] > sent[i] + MAX_DELAY}
    return checked - set(first), late


def test_a_deadline_claim_never_expects_a_filtered_record(spark: Any) -> None:
    """Cycle 1 judges what is older than max_delay at T0 + 9 s (lost: expected records without
    a copy by then, some of whose copies come late in cycle 2); cycle 2 judges every record
    by the same engine, incrementally, as the reference does."""
    records = Records(1_200, seed=31)
    rows = retimed(records, random.Random(31))
    dropped = heartbeats(records)
    engine = Engine()
    before = None
    for now in (T0 + timedelta(seconds=9), T0 + timedelta(seconds=30)):
        written = [r for r in rows if r["timestamp"] < now]
        frame = audited(spark, written, DEADLINE_CONFIG)
        fingerprints = Fingerprints(frame) if before is None else Fingerprints(
            frame, before=before, added=frame.subtract(before)
        )  # fmt: skip
        ours = engine_run.tables_of(engine.cycle(DEADLINE_CONFIG, fingerprints, {}, now))
        theirs = reference.query(REFERENCE_FINGERPRINTS, records=pa.Table.from_pylist(written))
        source, sink = engine_run.of_topics(theirs, "s"), engine_run.of_topics(theirs, "k")
        lost, late = assert_agree(ours, source, sink, now, MAX_DELAY, pipeline="f")
        lost_ids, late_ids = by_plain_count(records, written, now)
        found = {r["message_id"] for r in ours.lost}
        assert found == lost_ids and (lost, late) == (len(lost_ids), len(late_ids))
        assert all(r["cause"] == LossCause.NOT_IN_SINK_WITHIN_MAX_DELAY for r in ours.lost)
        # Heartbeats old enough to be judged, most without a copy, some with a late one:
        # never lost, never late.
        judged = {i for i, at in sent_at(records).items() if i in dropped and at < now - MAX_DELAY}
        assert len(judged) > 25 and not found & dropped
        theirs_late = reference.deadline(source, sink, now, MAX_DELAY, "f")
        assert not set(theirs_late["message_id"].to_pylist()) & dropped
        before = frame
    let_through = {r["key"].decode() for r in rows if r["topic"] == "k"} & dropped
    assert len(let_through) > 2  # late copies of heartbeats, each older than max_delay now
    assert "touched" in engine.last, engine.last
    assert late > 10 and lost == len(records.lost) > 10
