"""What `dgm analyze` publishes about the lab's PostgreSQL pipelines equals the truth, exactly.

Both modes run on a real broker into a real PostgreSQL server through three SIGKILLs while
records flow, with the collectors sampling meanwhile; then one real analysis run (audit
reading the tables incrementally through JDBC, analysis, publication). The truth is read
here without dgm: the producer's ledger and a plain SQL query of the table.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from lab.ledger import read_ledger
from lab.run import LabReport
from tests.support.postgres import PostgresUnderTest
from tests.support.published_lab import (
    EXPECTED_VERDICT,
    POSTGRES_MODES,
    LabRuns,
    PublishedLab,
    publish_lab,
)
from tests.support.published_lab import verdict as published_verdict

MODES = POSTGRES_MODES
EXPECTED = {
    "postgres-exactly-once": EXPECTED_VERDICT["exactly-once"],
    "postgres-at-least-once": EXPECTED_VERDICT["at-least-once"],
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def published(postgres_lab_runs: LabRuns, kafka: Any, spark: Any) -> PublishedLab:
    """The session's PostgreSQL lab runs (600 records at 60/s, three SIGKILLs each), audited,
    analyzed and published by one analysis run."""
    return publish_lab(postgres_lab_runs, kafka, spark)


def table_ids(postgres: PostgresUnderTest, report: LabReport) -> Counter[str]:
    """message id -> rows holding it, read with plain SQL."""
    assert report.external_sink is not None
    query = sql.SQL("SELECT message_id FROM {}").format(
        sql.Identifier(report.external_sink["table"])
    )
    with psycopg.connect(postgres.dsn) as db:
        return Counter(str(i) for (i,) in db.execute(query).fetchall())


@pytest.mark.parametrize("mode", MODES)
def test_postgres_pipelines_are_judged_exactly(
    published: PublishedLab, postgres: PostgresUnderTest, mode: str
) -> None:
    report = published.reports[mode]
    assert len(report.crashes) >= 3 and {c["signal"] for c in report.crashes} == {"SIGKILL"}
    acked = set(read_ledger(Path(report.ledger_path)).acked)
    stored = table_ids(postgres, report)
    row = published_verdict(published, mode)
    assert row["sink_records"] == sum(stored.values())
    assert row["duplicate_copies"] == sum(stored.values()) - len(stored)
    assert row["lost"] == len(acked - set(stored)) == 0
    assert row["records_checked"] == len(acked)
    assert (row["achieved"], row["meets_declared"]) == EXPECTED[mode]
    if mode == "postgres-exactly-once":
        assert row["duplicate_copies"] == 0
    else:
        assert row["duplicate_copies"] > 0, "a kill between rows and group commit repeats"
