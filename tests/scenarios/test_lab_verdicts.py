"""What `dgm analyze` publishes about real lab runs equals the truth, exactly.

The truth is computed here without dgm's analysis: the producer's ledger (what was sent and
acknowledged) and a plain confluent-kafka read of the topics (read_committed for what a
downstream consumer sees, read_uncommitted for what the log holds), or the external store.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

from lab.ledger import read_ledger
from tests.support.published_lab import EXPECTED_VERDICT, PublishedLab, verdict
from tests.support.truth import by_id, extra_copies, topic_ids


def query(lab: PublishedLab, sql: str, *parameters: Any) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(lab.database), read_only=True) as db:
        return db.execute(sql, list(parameters)).fetchall()


@pytest.mark.parametrize("run", ["at-most-once", "at-least-once", "exactly-once"])
def test_topic_pipelines_counts_equal_the_truth(
    published_lab: PublishedLab, kafka: Any, run: str
) -> None:
    report = published_lab.reports[run]
    assert len(report.crashes) >= 3 and {c["signal"] for c in report.crashes} == {"SIGKILL"}
    acked = set(read_ledger(Path(report.ledger_path)).acked)
    assert report.sink_topic is not None
    sink = by_id(topic_ids(kafka, report.sink_topic))
    row = verdict(published_lab, run)
    assert row["duplicate_copies"] + row["upstream_duplicates"] == extra_copies(sink)
    assert row["upstream_duplicates"] == 0  # idempotent source producer: no source duplicates
    assert row["lost"] == len(acked - set(sink))
    assert row["aborted_reads"] == 0
    assert row["records_checked"] == len(acked)
    assert (row["achieved"], row["meets_declared"]) == EXPECTED_VERDICT[run]


def test_at_least_once_duplicates_are_reprocessing(published_lab: PublishedLab, kafka: Any) -> None:
    report = published_lab.reports["at-least-once"]
    assert report.sink_topic is not None
    copies = topic_ids(kafka, report.sink_topic)
    truth = {message_id for message_id, n in by_id(copies).items() if n > 1}
    assert truth, "three SIGKILLs between produce and commit must duplicate"
    rows = query(
        published_lab,
        "SELECT message_id, cause, count(*) FROM duplicates WHERE pipeline = ? "
        "GROUP BY message_id, cause",
        published_lab.pipeline("at-least-once"),
    )
    assert {message_id for message_id, _, _ in rows} == truth
    assert {cause for _, cause, _ in rows} == {"reprocessing"}
    # Every copy is listed, with the same count the topic holds.
    assert {message_id: n for message_id, _, n in rows} == {
        message_id: by_id(copies)[message_id] for message_id in truth
    }


def test_exactly_once_broken_has_aborted_reads(published_lab: PublishedLab, kafka: Any) -> None:
    report = published_lab.reports["exactly-once-broken"]
    ledger = read_ledger(Path(report.ledger_path))
    assert report.sink_topic is not None
    sink = by_id(topic_ids(kafka, report.sink_topic))
    leaked = sum(n for message_id, n in sink.items() if message_id in ledger.aborted_ids)
    assert leaked > 0
    row = verdict(published_lab, "exactly-once-broken")
    assert row["aborted_reads"] == leaked
    assert row["lost"] == len(set(ledger.acked) - set(sink))
    assert (row["achieved"], row["meets_declared"]) == EXPECTED_VERDICT["exactly-once-broken"]


def test_idempotent_sink_is_audited_through_its_table(published_lab: PublishedLab) -> None:
    report = published_lab.reports["idempotent-sink"]
    assert len(report.crashes) >= 3
    store = report.external_sink
    assert store is not None
    with sqlite3.connect(f"file:{store['path']}?mode=ro", uri=True) as db:
        stored = Counter(i for (i,) in db.execute(f"SELECT {store['id_column']} FROM lab_sink"))
    acked = set(read_ledger(Path(report.ledger_path)).acked)
    row = verdict(published_lab, "idempotent-sink")
    assert row["sink_records"] == sum(stored.values())
    assert row["duplicate_copies"] == extra_copies(stored) == 0
    assert row["lost"] == len(acked - set(stored)) == 0
    assert row["records_checked"] == len(acked)
    assert (row["achieved"], row["meets_declared"]) == EXPECTED_VERDICT["idempotent-sink"]


def test_dropped_acks_duplicates_are_producer_retries(
    published_lab: PublishedLab, kafka: Any
) -> None:
    if "drop-acks" not in published_lab.reports:
        pytest.skip("the fault proxy needs dgm's embedded broker")
    report = published_lab.reports["drop-acks"]
    source = by_id(topic_ids(kafka, report.source_topic))
    assert extra_copies(source) > 0, "dropped acks without idempotence must duplicate"
    rows = query(
        published_lab,
        "SELECT cause, count(*) FILTER (WHERE is_extra_copy) FROM duplicates "
        "WHERE topic = ? GROUP BY cause",
        report.source_topic,
    )
    assert dict(rows) == {"producer retry": extra_copies(source)}
    # Downstream, the pipeline carried what it got: upstream duplicates, not its own.
    row = verdict(published_lab, "drop-acks")
    assert row["upstream_duplicates"] == extra_copies(source)


def test_every_verdict_is_published_with_evidence(published_lab: PublishedLab) -> None:
    rows = query(published_lab, "SELECT pipeline, faults_observed, evidence FROM verdicts")
    assert {pipeline for pipeline, _, _ in rows} == {
        published_lab.pipeline(run) for run in published_lab.reports
    }
    crashed = {published_lab.pipeline(r) for r in EXPECTED_VERDICT if r != "exactly-once-broken"}
    for pipeline, faults, evidence in rows:
        if pipeline in crashed:
            # SIGKILLed members leave and rejoin their group: the collectors saw faults.
            assert faults > 0 and evidence == "tested", (pipeline, faults, evidence)
