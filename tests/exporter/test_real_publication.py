"""`dgm exporter` as a process over the publication of a real lab run
(tests/support/published_lab.py: every mode on the session's broker through SIGKILLs,
collected and analyzed by the real `dgm analyze`): /metrics and the JSON API give the numbers
`dgm verdicts --json` prints for the same state directory, and the lag and transaction
numbers the alerts read."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest

from alerts import metrics as alert_metrics
from dgm.contracts.published import PUBLISHED_FILE, open_read_only
from dgm.contracts.samples import SampleStore
from dgm.util.ports import free_ports
from dgm.util.waiting import wait_until
from exporter.families import PIPELINE_VALUES
from tests.support.exporter_serving import Scrape, by, get, get_json, scrape, single
from tests.support.published_lab import PublishedLab

# The first test builds the session's lab publication (six lab runs and a Spark analysis):
# minutes on a busy 2-core machine.
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def config_file(published_lab: PublishedLab, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("exporter") / "dgm.toml"
    # The publication is a snapshot taken once per session, minutes before these tests run: an
    # hourly analysis interval keeps `dgm verdicts` from (rightly) calling it stale (exit 3).
    path.write_text(f'state_dir = "{published_lab.state_dir}"\n[analysis]\ninterval_s = 3600\n')
    return path


DGM = (sys.executable, "-m", "shell.cli")


def dgm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DGM, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def exporter(config_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m shell.cli exporter --config F --port P`; its base URL."""
    port = free_ports(1)[0]
    log = tmp_path_factory.mktemp("exporter-log") / "exporter.out"
    with log.open("w") as out:
        process = subprocess.Popen(
            [*DGM, "exporter", "--config", str(config_file), "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        assert process.poll() is None, f"dgm exporter exited: {log.read_text()}"
        try:
            return get(f"{base}/metrics")[0] == 200
        except OSError:
            return False

    try:
        wait_until(answers, 60, "the exporter's /metrics")
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(30)
    assert returncode == 0, log.read_text()
    assert f"dgm exporter on {base}/metrics" in log.read_text()


@pytest.fixture(scope="module")
def verdicts(config_file: Path) -> dict[str, Any]:
    """What `dgm verdicts --json` prints (exit 1: the broken pipeline violates)."""
    done = dgm("--config", str(config_file), "verdicts", "--json")
    assert done.returncode in (0, 1), done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    assert len(document["pipelines"]) >= 5
    return document


@pytest.fixture(scope="module")
def scraped(exporter: str) -> Scrape:
    return scrape(exporter)


def test_pipeline_series_are_the_verdicts(scraped: Scrape, verdicts: dict[str, Any]) -> None:
    rows = {row["pipeline"]: row for row in verdicts["pipelines"]}
    info = {
        dict(labels)["pipeline"]: dict(labels) for labels in scraped["dgm_pipeline_verdict_info"]
    }
    assert set(info) == set(rows)
    for name, row in rows.items():
        assert info[name] == {
            "pipeline": name,
            "declared": row["declared"],
            "achieved": row["achieved"],
            "evidence": row["evidence"],
            "group_id": row["consumer_group"],
            "source_cluster": row["source_cluster"],
            "sink_cluster": row["sink_cluster"],
        }
    meets = by(scraped, "dgm_pipeline_meets_declared", "pipeline")
    assert meets == {
        name: int(row["meets_declared"])
        for name, row in rows.items()
        if row["meets_declared"] is not None
    }
    assert 0 in meets.values(), "the exactly-once-broken pipeline violates"
    for family, column in PIPELINE_VALUES:
        expected = {n: float(r[column]) for n, r in rows.items() if r[column] is not None}
        assert by(scraped, family.name, "pipeline") == expected, family.name
    assert any(by(scraped, "dgm_pipeline_duplicate_ratio", "pipeline").values())
    assert any(by(scraped, "dgm_pipeline_observed_faults", "pipeline").values())
    # Torn commits and order ride along: in the JSON, served; the at-least-once sink holds
    # copies a killed processor wrote again after later ones.
    assert all({"torn_commits", "producer_out_of_order", "sink_out_of_order"} <= set(r) for r in
               rows.values())  # fmt: skip
    assert any(by(scraped, "dgm_pipeline_sink_out_of_order_records", "pipeline").values())


def test_health_series(
    scraped: Scrape, verdicts: dict[str, Any], published_lab: PublishedLab
) -> None:
    assert single(scraped, "dgm_publication_up") == 1
    finished = datetime.fromisoformat(verdicts["analyzed_at"])
    assert single(scraped, "dgm_last_analysis_timestamp_seconds") == pytest.approx(
        finished.timestamp(), abs=1e-3
    )
    assert single(scraped, "dgm_last_analysis_age_seconds") > 0
    assert single(scraped, "dgm_last_analysis_duration_seconds") > 0
    sampled = SampleStore(published_lab.state_dir).newest_time("offsets")
    assert sampled is not None
    assert single(scraped, "dgm_last_sample_timestamp_seconds") == sampled.timestamp()
    assert single(scraped, "dgm_last_sample_age_seconds") > 0
    assert single(scraped, "dgm_scrape_duration_seconds") > 0


def test_lag_and_transactions_are_what_the_alerts_read(
    scraped: Scrape, published_lab: PublishedLab
) -> None:
    with open_read_only(published_lab.database) as db:
        lso_lag = alert_metrics.lso_lag(db)
        group_lag = alert_metrics.consumer_lag_from_lso(db)
        hanging = alert_metrics.hanging_transactions(db)
        open_count = db.execute("SELECT count(*) FROM transactions").fetchone()
    per_topic: dict[str, float] = {}
    for labels, value in scraped["dgm_partition_lso_lag"].items():
        topic = dict(labels)["topic_name"]
        per_topic[topic] = max(per_topic.get(topic, value), value)
    assert per_topic == lso_lag and lso_lag
    assert by(scraped, "dgm_consumer_group_lag_from_lso", "group_id") == group_lag
    assert group_lag, "the lab's groups are sampled"
    hw = by(scraped, "dgm_consumer_group_lag_from_hw", "group_id")
    assert set(hw) == set(group_lag) and all(hw[g] >= group_lag[g] for g in hw)
    for name in (
        "dgm_partition_lso_stuck_seconds",
        "dgm_consumer_group_topic_partition_lag_from_hw",
        "dgm_consumer_group_topic_partition_lag_from_lso",
    ):
        assert scraped[name], name
    assert by(scraped, "dgm_hanging_transactions", "topic_name") == hanging
    assert open_count is not None
    assert ("dgm_open_transactions" in scraped) == (open_count[0] > 0)


def test_api_verdicts_are_dgm_verdicts_json(exporter: str, verdicts: dict[str, Any]) -> None:
    status, document = get_json(f"{exporter}/api/v1/verdicts")
    assert status == 200
    # age_s grows between the two reads; everything else is the same document.
    printed = dict(verdicts)
    assert document.pop("age_s") == pytest.approx(printed.pop("age_s"), abs=60)
    assert document == printed and document["stale"] is False


def test_api_pipeline_has_its_verdict_windows_and_faults(
    exporter: str, verdicts: dict[str, Any], published_lab: PublishedLab
) -> None:
    with duckdb.connect(str(published_lab.state_dir / PUBLISHED_FILE), read_only=True) as db:
        counts = dict(
            db.execute("SELECT pipeline, count(*) FROM pipeline_windows GROUP BY ALL").fetchall()
        )
        faults = dict(db.execute("SELECT pipeline, count(*) FROM faults GROUP BY ALL").fetchall())
    for row in verdicts["pipelines"]:
        name = row["pipeline"]
        status, document = get_json(f"{exporter}/api/v1/pipelines/{name}?limit=10000")
        assert status == 200
        assert document["verdict"] == row
        assert len(document["windows"]) == counts.get(name, 0) > 0
        starts = [w["window_start"] for w in document["windows"]]
        assert starts == sorted(starts, reverse=True)
        assert len(document["faults"]) == faults.get(name, 0)


def test_api_duplicates_are_the_tables_rows(exporter: str, published_lab: PublishedLab) -> None:
    sink = published_lab.reports["at-least-once"].sink_topic
    assert sink is not None
    with duckdb.connect(str(published_lab.database), read_only=True) as db:
        rows = db.execute(
            "SELECT message_id, copy_number FROM duplicates WHERE topic = ?", [sink]
        ).fetchall()
    assert rows
    status, document = get_json(f"{exporter}/api/v1/topics/{sink}/duplicates?limit=100000")
    assert status == 200 and document["topic"] == sink
    got = sorted((d["message_id"], d["copy_number"]) for d in document["duplicates"])
    assert got == sorted(rows)
    assert {d["cause"] for d in document["duplicates"]} == {"reprocessing"}
