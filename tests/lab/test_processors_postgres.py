"""The PostgreSQL sink modes, run by the lab on a real broker and a real PostgreSQL server
through real SIGKILLs. The truth is read here, independently of the lab: the source topic
with a plain read_committed consumer, the table with a plain SQL query.

The runs are the session's (`postgres_lab_runs`, tests/support/published_lab.py: 600 records
at 60/s, three SIGKILLs each), which tests/scenarios/test_lab_postgres_verdicts.py judges too:
one run of each mode for both."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from lab.ledger import read_ledger
from lab.processors.postgres_sink import PostgresSink, stored_offsets
from lab.processors.sqlite_sink import SinkRow
from lab.run import LabReport
from tests.support.postgres import PostgresUnderTest
from tests.support.published_lab import MESSAGES, LabRuns
from tests.support.truth import read_records

pytestmark = pytest.mark.slow

Position = tuple[int, int]  # source partition, offset


def read_source(kafka: Any, topic: str) -> dict[Position, str]:
    """(partition, offset) -> message id of every committed source record."""
    records = read_records(kafka.bootstrap_servers, topic)
    return {(r.partition, r.offset): r.header_id for r in records}


def read_table(postgres: PostgresUnderTest, table: str) -> list[tuple[str, int, int]]:
    """(message id, source partition, source offset) of every row."""
    query = sql.SQL("SELECT message_id, source_partition, source_offset FROM {}").format(
        sql.Identifier(table)
    )
    with psycopg.connect(postgres.dsn) as db:
        return [(str(i), int(p), int(o)) for i, p, o in db.execute(query).fetchall()]


def lab(runs: LabRuns, mode: str) -> LabReport:
    """The session's run of `mode`: caught up, killed three times where it was aimed."""
    report = runs.reports[mode]
    assert report.caught_up, "the processor never caught up with the source"
    assert report.messages["sent"] == MESSAGES
    assert len(report.crashes) >= 3, report.crashes
    for crash in report.crashes:
        assert crash["signal"] == "SIGKILL" and crash["returncode"] == -9, crash
        assert crash["aim"] == "between-produce-and-commit", crash
    assert report.external_sink is not None and report.external_sink["kind"] == "postgresql"
    return report


def lab_and_truth(
    kafka: Any, postgres: PostgresUnderTest, runs: LabRuns, mode: str
) -> tuple[LabReport, dict[Position, str], list[tuple[str, int, int]]]:
    """The run of `mode`, its committed source records and the rows of its table."""
    report = lab(runs, mode)
    assert report.external_sink is not None
    source = read_source(kafka, report.source_topic)
    return report, source, read_table(postgres, report.external_sink["table"])


def test_offsets_stored_with_the_rows_store_every_record_once(
    kafka: Any, postgres: PostgresUnderTest, postgres_lab_runs: LabRuns
) -> None:
    report, source, rows = lab_and_truth(
        kafka, postgres, postgres_lab_runs, "postgres-exactly-once"
    )
    copies = Counter((p, o) for _, p, o in rows)
    assert copies == Counter(source.keys())  # every source record, exactly once
    assert {(p, o): i for i, p, o in rows} == source
    assert set(source.values()) == set(read_ledger(Path(report.ledger_path)).acked)


def test_offsets_committed_after_the_rows_store_duplicates_and_lose_nothing(
    kafka: Any, postgres: PostgresUnderTest, postgres_lab_runs: LabRuns
) -> None:
    _, source, rows = lab_and_truth(kafka, postgres, postgres_lab_runs, "postgres-at-least-once")
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
