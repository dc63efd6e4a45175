"""The PostgreSQL sink modes, run by the lab on a real broker and a real PostgreSQL server
through real SIGKILLs. The truth is read here, independently of the lab: the source topic
with a plain read_committed consumer, the table with a plain SQL query."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, TopicPartition
from psycopg import sql

from dgm.headers import ID, header_map
from dgm.waiting import wait_until
from lab.ledger import read_ledger
from lab.processors.postgres_sink import PostgresSink, SinkRow, stored_offsets
from lab.run import LabReport, LabSettings, run_lab
from tests.postgres import PostgresUnderTest

MESSAGES = 600
PARTITIONS = 3
RATE = 60.0  # ~10 s of production: the kills land while records flow

pytestmark = pytest.mark.slow

Position = tuple[int, int]  # source partition, offset


def read_source(kafka: Any, topic: str) -> dict[Position, str]:
    """(partition, offset) -> message id of every committed source record."""
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": f"truth-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        for p in range(PARTITIONS)
    }
    found: dict[Position, str] = {}

    def at_end() -> bool:
        for message in consumer.consume(500, 0.2):
            assert message.error() is None, message.error()
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None
            found[(partition, offset)] = header_map(message.headers())[ID].decode()
        done = consumer.position([TopicPartition(topic, p) for p in range(PARTITIONS)])
        return all(tp.offset >= ends[tp.partition] for tp in done)

    try:
        wait_until(at_end, 60, f"reading {topic} to its end", interval=0)
    finally:
        consumer.close()
    return found


def read_table(postgres: PostgresUnderTest, table: str) -> list[tuple[str, int, int]]:
    """(message id, source partition, source offset) of every row."""
    query = sql.SQL("SELECT message_id, source_partition, source_offset FROM {}").format(
        sql.Identifier(table)
    )
    with psycopg.connect(postgres.dsn) as db:
        return [(str(i), int(p), int(o)) for i, p, o in db.execute(query).fetchall()]


def lab(kafka: Any, postgres: PostgresUnderTest, tmp_path: Path, mode: str) -> LabReport:
    settings = LabSettings(
        pipeline=f"test-{mode}",
        mode=mode,  # type: ignore[arg-type]
        bootstrap_servers=kafka.bootstrap_servers,
        lab_dir=tmp_path,
        messages=MESSAGES,
        rate=RATE,
        crashes=3,
        sink_dsn=postgres.dsn,
    )
    report = run_lab(settings)
    assert report.caught_up, "the processor never caught up with the source"
    assert report.messages["sent"] == MESSAGES
    assert len(report.crashes) >= 3, report.crashes
    for crash in report.crashes:
        assert crash["signal"] == "SIGKILL" and crash["returncode"] == -9, crash
        assert crash["aim"] == "between-produce-and-commit", crash
    assert report.external_sink is not None and report.external_sink["kind"] == "postgresql"
    return report


def test_offsets_stored_with_the_rows_store_every_record_once(
    kafka: Any, postgres: PostgresUnderTest, tmp_path: Path
) -> None:
    report = lab(kafka, postgres, tmp_path, "postgres-exactly-once")
    assert report.external_sink is not None
    source = read_source(kafka, report.source_topic)
    rows = read_table(postgres, report.external_sink["table"])
    copies = Counter((p, o) for _, p, o in rows)
    assert copies == Counter(source.keys())  # every source record, exactly once
    assert {(p, o): i for i, p, o in rows} == source
    assert set(source.values()) == set(read_ledger(Path(report.ledger_path)).acked)


def test_offsets_committed_after_the_rows_store_duplicates_and_lose_nothing(
    kafka: Any, postgres: PostgresUnderTest, tmp_path: Path
) -> None:
    report = lab(kafka, postgres, tmp_path, "postgres-at-least-once")
    assert report.external_sink is not None
    source = read_source(kafka, report.source_topic)
    rows = read_table(postgres, report.external_sink["table"])
    assert {(p, o) for _, p, o in rows} == set(source)  # every source record, at least once
    assert all(source[(p, o)] == i for i, p, o in rows)
    duplicates = len(rows) - len({i for i, _, _ in rows})
    assert duplicates > 0, "a kill between the rows and the group commit must repeat a batch"
    # Reprocessing: each extra copy is the same source record stored again.
    assert duplicates == len(rows) - len(source)


def test_rows_and_offsets_are_one_transaction(postgres: PostgresUnderTest) -> None:
    table = postgres.new_table_name("lab_sink")
    store = PostgresSink(postgres.dsn, table)
    try:
        store.store([SinkRow("a", b"V", "src", 0, 0)], [("src", 0, 1)])
        bad = SinkRow("b", b"V", "src", 0, None)  # type: ignore[arg-type]  # NOT NULL violated
        with pytest.raises(psycopg.errors.NotNullViolation):
            store.store([SinkRow("z", b"V", "src", 0, 1), bad], [("src", 0, 9)])
        assert store.next_offsets("src") == {0: 1}
        assert stored_offsets(postgres.dsn, table, "src") == {0: 1}
        assert [i for i, _, _ in read_table(postgres, table)] == ["a"]
    finally:
        store.close()
    assert stored_offsets(postgres.dsn, postgres.new_table_name("none"), "src") == {}
