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

from dgm.config.loader import load_config
from lab.ledger import read_ledger
from lab.run import LabReport
from spark_jobs.job import AnalysisJob
from tests.support.postgres import PostgresUnderTest
from tests.support.published_lab import (
    EXPECTED_VERDICT,
    collecting,
    lab_run,
    offsets_samples,
    wait_for_cycles,
)
from tests.support.published_lab import verdict as published_verdict

MESSAGES = 600
RATE = 60.0  # ~10 s of production: the kills land while records flow
MODES = ("postgres-exactly-once", "postgres-at-least-once")
EXPECTED = {
    "postgres-exactly-once": EXPECTED_VERDICT["exactly-once"],
    "postgres-at-least-once": EXPECTED_VERDICT["at-least-once"],
}

pytestmark = pytest.mark.slow


class Published:
    def __init__(self, state_dir: Path, reports: dict[str, LabReport]) -> None:
        self.state_dir, self.reports = state_dir, reports

    @property
    def database(self) -> Path:
        from dgm.contracts.published import PUBLISHED_FILE

        return self.state_dir / PUBLISHED_FILE

    def pipeline(self, run: str) -> str:
        return self.reports[run].pipeline


@pytest.fixture(scope="module")
def published(
    kafka: Any, spark: Any, postgres: PostgresUnderTest, tmp_path_factory: pytest.TempPathFactory
) -> Published:
    root = tmp_path_factory.mktemp("lab-postgres")
    state_dir, config_path = root / "state", root / "dgm.toml"
    config_path.write_text(f'state_dir = "{state_dir}"\n\n[analysis]\ngrace_s = 0\nwindow_s = 60\n')
    reports: dict[str, LabReport] = {}
    with collecting(kafka.bootstrap_servers, load_config(config_path), interval_s=1.0):
        for mode in MODES:
            reports[mode] = lab_run(
                kafka, root, config_path, mode, mode,
                messages=MESSAGES, rate=RATE, crashes=3, sink_dsn=postgres.dsn,
            )  # fmt: skip
        wait_for_cycles(state_dir, offsets_samples(state_dir) + 2)  # samples hold the final offsets
    job = AnalysisJob(load_config(config_path), kafka.bootstrap_servers, spark=spark)
    job.progress = lambda line: None
    job.run_once()
    return Published(state_dir, reports)


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
    published: Published, postgres: PostgresUnderTest, mode: str
) -> None:
    report = published.reports[mode]
    assert len(report.crashes) >= 3 and {c["signal"] for c in report.crashes} == {"SIGKILL"}
    acked = set(read_ledger(Path(report.ledger_path)).acked)
    stored = table_ids(postgres, report)
    row = published_verdict(published, mode)  # type: ignore[arg-type]
    assert row["sink_records"] == sum(stored.values())
    assert row["duplicate_copies"] == sum(stored.values()) - len(stored)
    assert row["lost"] == len(acked - set(stored)) == 0
    assert row["records_checked"] == len(acked)
    assert (row["achieved"], row["meets_declared"]) == EXPECTED[mode]
    if mode == "postgres-exactly-once":
        assert row["duplicate_copies"] == 0
    else:
        assert row["duplicate_copies"] > 0, "a kill between rows and group commit repeats"
