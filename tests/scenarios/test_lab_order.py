"""Records out of order in real lab runs (tests/support/published_lab.py), as `dgm analyze`
published them, against an independent read of the topics (tests/support/truth.py's own
reading of the rule).

A producer with idempotence off and 5 requests in flight, whose acks the fault proxy drops,
writes its retried requests after later ones: its source topic holds records behind a higher
dgm-seq of their session. The same producer with idempotence on writes none. An at-least-once
processor SIGKILLed between produce and commit writes again what it had written after its
last commit: its sink holds copies behind a higher offset of their source partition.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from dgm.contracts.headers import PRODUCER, SEQ
from dgm.contracts.vocabulary import OrderAnomaly
from lab.ledger import read_ledger
from tests.support.published_lab import PublishedLab
from tests.support.truth import producer_out_of_order, read_records, sink_out_of_order


def query(lab: PublishedLab, sql: str, *parameters: Any) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(lab.database), read_only=True) as db:
        return db.execute(sql, list(parameters)).fetchall()


def published_behind(lab: PublishedLab, topic: str, anomaly: OrderAnomaly) -> set[tuple[int, int]]:
    """(partition, offset) of the topic's records the publication lists as out of order."""
    rows = query(
        lab,
        'SELECT DISTINCT "partition", "offset" FROM out_of_order WHERE topic = ? AND anomaly = ?',
        topic,
        anomaly.value,
    )
    return {(partition, offset) for partition, offset in rows}


def counted(lab: PublishedLab, run: str, column: str) -> int:
    rows = query(lab, f"SELECT {column} FROM verdicts WHERE pipeline = ?", lab.pipeline(run))
    return int(rows[0][0])


def test_dropped_acks_with_five_in_flight_reorder_the_source(
    published_lab: PublishedLab, kafka: Any
) -> None:
    if "drop-acks" not in published_lab.reports:
        pytest.skip("the fault proxy needs dgm's embedded broker")
    report = published_lab.reports["drop-acks"]
    dropped = next(f for f in report.faults if f["kind"] == "drop-acks")
    assert dropped["detail"]["dropped_responses"] > 0
    records = read_records(kafka.bootstrap_servers, report.source_topic)
    truth = {(r.partition, r.offset) for r in producer_out_of_order(records)}
    print(
        f"\ndrop-acks, idempotence off, 5 in flight: {report.messages['sent']} sent, "
        f"{len(records)} records, {dropped['detail']['dropped_responses']} responses dropped, "
        f"{len(truth)} out of order (independent read)"
    )
    assert truth, "retried requests must land after later ones"
    assert published_behind(published_lab, report.source_topic, OrderAnomaly.OUT_OF_ORDER) == truth
    assert counted(published_lab, "drop-acks", "producer_out_of_order") == len(truth)
    totals = query(
        published_lab,
        "SELECT out_of_order FROM cumulative_topics WHERE topic = ?",
        report.source_topic,
    )
    assert totals == [(len(truth),)]
    # Each listed record names the higher dgm-seq before it and where that record is.
    by_offset = {(r.partition, r.offset): r for r in records}
    for partition, offset, position, preceded_by, preceded_at, stream in query(
        published_lab,
        'SELECT "partition", "offset", position, preceded_by, preceded_at, stream '
        "FROM out_of_order WHERE topic = ?",
        report.source_topic,
    ):
        record, before = by_offset[(partition, offset)], by_offset[(partition, preceded_at)]
        assert int(record.headers[SEQ]) == position < preceded_by == int(before.headers[SEQ])
        assert preceded_at < offset and record.headers[PRODUCER].decode() == stream


def test_the_same_producer_idempotent_keeps_its_order(
    published_lab: PublishedLab, kafka: Any
) -> None:
    if "drop-acks-idempotent" not in published_lab.reports:
        pytest.skip("the fault proxy needs dgm's embedded broker")
    report = published_lab.reports["drop-acks-idempotent"]
    dropped = next(f for f in report.faults if f["kind"] == "drop-acks")
    assert dropped["detail"]["dropped_responses"] > 0
    records = read_records(kafka.bootstrap_servers, report.source_topic)
    assert len(records) == len(read_ledger(Path(report.ledger_path)).acked)
    print(
        f"\ndrop-acks, idempotence on, 5 in flight: {report.messages['sent']} sent, "
        f"{len(records)} records, {dropped['detail']['dropped_responses']} responses dropped"
    )
    assert producer_out_of_order(records) == []
    assert published_behind(published_lab, report.source_topic, OrderAnomaly.OUT_OF_ORDER) == set()
    assert counted(published_lab, "drop-acks-idempotent", "producer_out_of_order") == 0


def test_reprocessing_after_kills_puts_the_sink_out_of_order(
    published_lab: PublishedLab, kafka: Any
) -> None:
    for run, reorders in (("at-least-once", True), ("exactly-once", False)):
        report = published_lab.reports[run]
        assert report.sink_topic is not None
        records = read_records(kafka.bootstrap_servers, report.sink_topic)
        truth = {(r.partition, r.offset) for r in sink_out_of_order(records)}
        print(f"\n{run}: {len(records)} sink records, {len(truth)} out of order (truth)")
        assert bool(truth) == reorders, (run, len(truth))
        sink = OrderAnomaly.SINK_OUT_OF_ORDER
        assert published_behind(published_lab, report.sink_topic, sink) == truth, run
        assert counted(published_lab, run, "sink_out_of_order") == len(truth), run
        assert counted(published_lab, run, "producer_out_of_order") == 0, run
