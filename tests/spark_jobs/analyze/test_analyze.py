"""analyze() on one synthetic world of pipelines, each built to reach one verdict; every
expected value is worked out by hand beside the data. One analyze run, collected once."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dgm.config.document import DgmConfig
from dgm.contracts.published import TABLES, open_read_only, published_path
from spark_jobs.analysis_input import Fingerprints
from spark_jobs.analyze.analysis import analyze
from spark_jobs.analyze.publish import ARROW_TYPES, arrow_of, publish
from spark_jobs.analyze.runs import fill_run
from spark_jobs.schemas import FINGERPRINT
from tests.support.analysis_world import CONFIG, NOW, PIPELINES, naive, samples, world


def _naive(value: Any) -> Any:
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


@pytest.fixture(scope="module")
def published(
    spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, list[dict[str, Any]]]]:
    """The tables of one analyze run, as published to DuckDB (rows as the Arrow tables that
    went in, timestamps naive UTC)."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    try:
        fingerprints = spark.createDataFrame(world(), FINGERPRINT).cache()
        frames = analyze(spark, CONFIG, Fingerprints(fingerprints), samples(), NOW)
        frames["runs"] = fill_run(frames["runs"], "run-1", NOW, NOW, 42)
        for table in TABLES:
            found = arrow_of(frames[table.name], table).schema
            assert found.names == list(table.names), table.name
            assert found.types == [ARROW_TYPES[c.sql_type] for c in table.columns], table.name
        arrow = {table.name: arrow_of(frames[table.name], table) for table in TABLES}
        state_dir = tmp_path_factory.mktemp("state")
        publish(arrow, state_dir)
        with open_read_only(published_path(state_dir)) as connection:
            for name, table in arrow.items():
                count = connection.execute(f'SELECT count(*) FROM "{name}"').fetchone()
                assert count == (table.num_rows,), name
        yield {
            name: [{k: _naive(v) for k, v in row.items()} for row in table.to_pylist()]
            for name, table in arrow.items()
        }
        fingerprints.unpersist()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


def verdicts(published: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return {r["pipeline"]: r for r in published["verdicts"]}


def test_every_verdict_is_reached_and_judged_against_the_declared_one(
    published: dict[str, list[dict[str, Any]]],
) -> None:
    found = {
        name: (v["achieved"], v["meets_declared"], v["records_checked"])
        for name, v in verdicts(published).items()
    }
    assert found == {
        "eo": ("exactly-once", True, 10),
        "alo": ("at-least-once", True, 10),
        "amo": ("at-most-once", False, 10),
        "ng": ("no guarantee", False, 10),
        "ar": ("no guarantee", False, 10),
        "few": ("insufficient evidence", None, 3),
        "up": ("exactly-once", True, 11),
        # The external table holds source offsets 0..8: claimed up to 9, all there.
        "ext": ("exactly-once", True, 9),
    }


def test_counts_and_rates_of_the_verdicts(published: dict[str, list[dict[str, Any]]]) -> None:
    v = verdicts(published)
    assert (v["alo"]["duplicate_copies"], v["alo"]["distinct_ids"]) == (1, 10)
    assert v["alo"]["duplicate_rate"] == pytest.approx(0.1)
    assert (v["amo"]["lost"], v["amo"]["loss_rate"], v["amo"]["duplicate_rate"]) == (1, 0.1, 0.0)
    assert (v["ng"]["lost"], v["ng"]["duplicate_copies"]) == (1, 1)
    assert (v["ar"]["aborted_reads"], v["ar"]["lost"], v["ar"]["sink_records"]) == (1, 0, 11)
    assert v["eo"]["unidentified"] == 1
    assert v["eo"]["sink"] == ["k-eo"] and v["eo"]["source_topics"] == ["s-eo"]
    assert v["ext"]["sink"] == ["external:ext:tbl"]
    assert (v["eo"]["first_record_at"], v["eo"]["last_record_at"]) == (naive(0), naive(90))
    assert v["eo"]["declared"] == "exactly-once" and v["eo"]["consumer_group"] == "g-eo"


def test_upstream_duplicates_are_reported_not_counted(
    published: dict[str, list[dict[str, Any]]],
) -> None:
    up = verdicts(published)["up"]
    assert (up["duplicate_copies"], up["upstream_duplicates"]) == (0, 1)
    copies = [r for r in published["duplicates"] if r["topic"] == "k-up"]
    assert {(r["pipeline"], r["cause"], r["copies"]) for r in copies} == {("up", "upstream", 2)}


def test_faults_are_counted_while_the_checked_records_flowed(
    published: dict[str, list[dict[str, Any]]],
) -> None:
    found = {name: (v["faults_observed"], v["evidence"]) for name, v in verdicts(published).items()}
    # broker_left at 100 s is within every span [0, 90 + 30 grace] except few's (1000 s on).
    assert found["eo"] == (3, "tested")  # + its group's rebalance and member_left
    assert found["amo"] == (2, "tested")  # + the epoch bump of a producer on its sink
    assert found["alo"] == (1, "tested")  # its member_joined came an hour too late
    assert found["few"] == (0, "untested")
    rows = {(r["event"], r["pipeline"], r["group_id"]) for r in published["faults"]}
    assert rows == {
        ("rebalance", "eo", "g-eo"),
        ("member_left", "eo", "g-eo"),
        ("member_joined", "alo", "g-alo"),
        ("broker_left", None, None),
        ("outage_start", None, None),
        ("epoch_bump", "amo", None),
        ("member_left", None, "unmonitored"),
        ("collector_start", None, None),
    }


def test_pipeline_windows_have_counts_and_a_verdict_each(
    published: dict[str, list[dict[str, Any]]],
) -> None:
    windows = {
        (r["pipeline"], r["window_start"]): r
        for r in published["pipeline_windows"]
        if r["pipeline"] in ("eo", "alo")
    }
    eo0, eo60 = windows["eo", naive(0)], windows["eo", naive(60)]
    assert (eo0["records_checked"], eo0["faults_observed"], eo0["achieved"]) == (
        6,
        2,
        "exactly-once",
    )
    assert (eo60["records_checked"], eo60["faults_observed"]) == (4, 1)
    assert (eo60["achieved"], eo60["meets_declared"]) == ("insufficient evidence", None)
    alo60 = windows["alo", naive(60)]
    # Copies at 61, 71, 81, 91 and 75 (alo3's extra one): 5 distinct ids, 1 extra copy.
    assert (alo60["duplicate_copies"], alo60["duplicate_rate"]) == (1, 0.2)
    assert windows["alo", naive(0)]["duplicate_copies"] == 0
    lost = {
        (r["pipeline"], r["window_start"]): r["lost"]
        for r in published["pipeline_windows"]
        if r["lost"]
    }
    assert lost == {("amo", naive(0)): 1, ("ng", naive(0)): 1}


def test_topic_windows_and_the_cumulative_row(
    published: dict[str, list[dict[str, Any]]],
) -> None:
    rows = {(r["topic"], r["window_start"]): r for r in published["topic_windows"]}
    cumulative = rows["k-alo", None]
    assert (cumulative["records"], cumulative["distinct_ids"], cumulative["duplicate_copies"]) == (
        11,
        10,
        1,
    )
    assert rows["k-alo", naive(60)]["duplicate_copies"] == 1
    assert rows["s-ar", naive(60)]["aborted"] == 1
    assert rows["k-eo", None]["unidentified"] == 1
    partitions = {(r["topic"], r["window_start"]): r for r in published["partition_windows"]}
    assert partitions["k-alo", naive(60)]["records"] == 5
    assert partitions["k-alo", naive(60)]["duplicate_copies"] == 1


def test_duplicates_carry_their_pipeline_and_cause(
    published: dict[str, list[dict[str, Any]]],
) -> None:
    found = {
        (r["topic"], r["message_id"], r["pipeline"], r["cause"]) for r in published["duplicates"]
    }
    assert found == {
        ("k-alo", "alo3", "alo", "reprocessing"),
        ("k-ng", "ng4", "ng", "producer retry"),
        ("k-up", "up3", "up", "upstream"),
        ("s-up", "up3", None, "unknown"),
        ("plain", "p1", None, "producer retry"),
        ("plain", "p2", None, "unknown"),
        ("derived", "p1", None, "upstream"),
    }
    assert len(published["duplicates"]) == 2 * len(found)


def test_lost_rows_have_their_source_coordinates(
    published: dict[str, list[dict[str, Any]]],
) -> None:
    found = sorted(
        (r["pipeline"], r["message_id"], r["topic"], r["offset"], r["missing"], r["cause"])
        for r in published["lost"]
    )
    assert found == [
        ("amo", "amo5", "s-amo", 5, 1, "not in sink"),
        ("ng", "ng2", "s-ng", 2, 1, "not in sink"),
    ]


def test_sample_tables(published: dict[str, list[dict[str, Any]]]) -> None:
    transactions = published["transactions"]
    assert [(t["producer_id"], t["age_ms"], t["hanging"]) for t in transactions] == [(5, 900, True)]
    assert len(published["group_lag"]) == len(PIPELINES)  # 7 groups + an older g-eo sample
    assert published["partition_offsets"][0]["lso_lag"] == 1
    (run,) = published["runs"]
    assert (run["run_id"], run["records_audited"], run["window_s"]) == ("run-1", 42, 60)
    assert run["fingerprints"] == len(world())
    assert run["last_sample_at"] == naive(7200)


def test_no_pipelines_no_fingerprints_no_samples_still_give_every_table(
    spark: Any, tmp_path: Path
) -> None:
    empty = spark.createDataFrame([], FINGERPRINT)
    frames = analyze(spark, DgmConfig(), Fingerprints(empty), {}, NOW)
    assert sorted(frames) == sorted(t.name for t in TABLES)
    publish(frames, tmp_path)
    with open_read_only(published_path(tmp_path)) as connection:
        for table in TABLES:
            (count,) = connection.execute(f'SELECT count(*) FROM "{table.name}"').fetchone() or ()
            assert count == (1 if table.name == "runs" else 0), table.name
        run = connection.execute("SELECT fingerprints, last_sample_at, window_s FROM runs")
        assert run.fetchone() == (0, None, 60)


def test_runs_leave_nothing_persisted_in_the_executors(spark: Any, tmp_path: Path) -> None:
    """A long-running `dgm analyze` keeps fingerprints (spark_jobs/audit/incremental_load.py)
    and nothing else: an analyze run's own Spark output goes to the driver, so nothing piles
    up run after run."""
    fingerprints = spark.createDataFrame(world(), FINGERPRINT)
    before = spark.sparkContext._jsc.getPersistentRDDs().size()  # type: ignore[union-attr]
    for _ in range(3):
        publish(analyze(spark, CONFIG, Fingerprints(fingerprints), samples(), NOW), tmp_path)
        assert spark.sparkContext._jsc.getPersistentRDDs().size() == before  # type: ignore[union-attr]
