"""Pipelines whose processor is a share-group consumer (KIP-932), judged by `dgm analyze`
under both claims.

The session's two runs (`share_group_runs`, tests/support/share_group_run.py): the relay that
produces before it acknowledges, SIGKILLed twice, is at-least-once by redelivery, and dgm's
duplicates are the truth's (a plain read of its topics); the relay that acknowledges first is
at-most-once, and dgm's lost records are the truth's.
- The group claim reads the share group's acknowledgements (its share-partition start
  offsets, sampled by the collectors): duplicates are named redelivery, losses acknowledged
  or archived, the claim share acknowledgements.
- The deadline claim needs no group: every record older than max_delay must be in the sink;
  its duplicates keep the rules' word (reprocessing), since no group says it was a share
  group's.
- Kafka's console share consumer piped into its console producer stamps no dgm header: judged
  from the log and the samples alone, by the same claim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from dgm.config.loader import append_pipeline, load_config
from dgm.config.pipelines import MessageIdRule, PipelineConfig, Semantic
from dgm.contracts.published import PUBLISHED_FILE
from dgm.contracts.vocabulary import Achieved, Claim, DuplicateCause, LossCause
from lab.share_group import ShareGroupReport
from spark_jobs.analyze.share_groups import REDELIVERED
from spark_jobs.job import AnalysisJob
from tests.support.dashboard_app import APP, no_exception, page, write_config
from tests.support.exporter_serving import scrape, serving
from tests.support.header_free import duplicates_rows, id_of
from tests.support.published_lab import pipeline_verdict
from tests.support.share_group_run import MAX_DELAY, MESSAGES, ShareGroupRuns
from tests.support.share_starts import newest_share_rows, newest_start_offsets
from tests.support.truth import read_records
from tests.support.truth_records import delivery


def _declared(report: ShareGroupReport, name: str, semantic: Semantic) -> PipelineConfig:
    return PipelineConfig(
        name=name,
        source_topics=(report.source_topic,),
        sink_topics=(report.sink_topic,),
        declared_semantic=semantic,
        claim="deadline",
        max_delay=f"{MAX_DELAY.total_seconds():.0f}s",
    )


def _claimed_by_group(report: ShareGroupReport, name: str, semantic: Semantic) -> PipelineConfig:
    return PipelineConfig(
        name=name,
        source_topics=(report.source_topic,),
        sink_topics=(report.sink_topic,),
        declared_semantic=semantic,
        consumer_group=report.group,
    )


def _truths(kafka: Any, runs: ShareGroupRuns) -> dict[str, Any]:
    truths = {}
    for report in (runs.redelivering, runs.losing):
        source = read_records(kafka.bootstrap_servers, report.source_topic)
        sink = read_records(kafka.bootstrap_servers, report.sink_topic)
        truths[report.order] = delivery(source, sink, sink_by_key=False, filtered=False)
    return truths


@pytest.mark.integration
@pytest.mark.slow
def test_share_group_pipelines_are_judged_exactly_by_their_acknowledgements(
    kafka: Any,
    spark: Any,
    share_group_runs: ShareGroupRuns,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = share_group_runs
    redelivering, losing = runs.redelivering, runs.losing
    assert redelivering.caught_up and losing.caught_up
    # Its own dgm.toml: each sink topic is one pipeline's (the deadline test declares others).
    config_path = tmp_path / "dgm.toml"
    config_path.write_text(runs.config_path.read_text().split("[[pipelines]]")[0])
    append_pipeline(
        config_path, _claimed_by_group(redelivering, "share-acked-redelivering", "at-least-once")
    )
    append_pipeline(config_path, _claimed_by_group(losing, "share-acked-first", "at-most-once"))
    job = AnalysisJob(load_config(config_path), kafka.bootstrap_servers, "local[2]", spark=spark)
    job.progress = lambda line: None
    job.run_once()
    below = {r.order: _below_start(kafka, runs.state_dir, r) for r in (redelivering, losing)}

    truth = below[redelivering.order]
    row = pipeline_verdict(runs.state_dir, "share-acked-redelivering")
    assert (row["claim"], row["claim_detail"]) == (
        Claim.SHARE_ACKNOWLEDGEMENTS.value,
        f"share group {redelivering.group}",
    )
    assert row["records_checked"] == truth.source > 0
    assert row["lost"] == len(truth.lost) == 0
    whole = _truths(kafka, runs)[redelivering.order]  # duplicates need no claim
    assert row["duplicate_copies"] == whole.duplicates == redelivering.killed_records > 0
    assert (row["achieved"], row["meets_declared"]) == (Achieved.AT_LEAST_ONCE.value, True)
    extra = [
        r
        for r in duplicates_rows(runs.state_dir / PUBLISHED_FILE, redelivering.sink_topic)
        if r["is_extra_copy"] and r["pipeline"] == "share-acked-redelivering"
    ]
    assert len(extra) == whole.duplicates
    assert {r["cause"] for r in extra} == {DuplicateCause.REDELIVERY.value}
    assert all(r["evidence"].endswith(REDELIVERED) for r in extra)
    _shown(redelivering, whole.duplicates, runs.state_dir, monkeypatch)

    truth = below[losing.order]
    row = pipeline_verdict(runs.state_dir, "share-acked-first")
    assert row["claim"] == Claim.SHARE_ACKNOWLEDGEMENTS.value
    assert row["records_checked"] == truth.source > 0
    assert row["lost"] == len(truth.lost) > 0
    assert row["causes"] == {(LossCause.ACKNOWLEDGED_OR_ARCHIVED.value, "default"): len(truth.lost)}
    assert row["duplicate_copies"] == 0
    assert (row["achieved"], row["meets_declared"]) == (Achieved.AT_MOST_ONCE.value, True)
    print(
        f"\nshare groups by their acknowledgements: produce-first {redelivering.killed_records} "
        f"copied twice (dgm {len(extra)} redeliveries, broker redelivered "
        f"{redelivering.redelivered}), {below[redelivering.order].source} of {MESSAGES} below "
        f"the start offsets; acknowledge-first {losing.killed_records} lost, "
        f"{len(truth.lost)} of them below the start offsets ({truth.source} records): dgm "
        f"{row['lost']} acknowledged or archived"
    )


def _shown(
    report: ShareGroupReport, redelivered: int, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The groups page's share-partitions of the group, as the newest samples and the
    truth say (each start offset and end, the broker's share lag, the redelivered copies),
    and the exporter's share lag of the group."""
    monkeypatch.setenv("DGM_CONFIG", str(write_config(state_dir)))
    monkeypatch.setenv("DGM_STATE_DIR", str(state_dir))
    monkeypatch.setenv("DGM_DASHBOARD_REFRESH_S", "0")
    at = page(AppTest.from_file(str(APP), default_timeout=60), "groups", group=report.group)
    no_exception(at)
    (shown,) = [f.value for f in at.dataframe if "redelivered copies" in f.value.columns]
    rows = newest_share_rows(state_dir, report.group)
    assert len(shown) == len(rows) > 0
    for item in shown.to_dict("records"):
        row = rows[(item["topic"], item["partition"])]
        assert (item["start offset"], item["end"]) == (
            row["committed_offset"],
            row["high_watermark"],
        )
        assert item["share lag"] == row["share_lag"]
    assert shown["redelivered copies"].sum() == redelivered
    with serving(state_dir) as base:
        served = scrape(base)["dgm_share_group_lag"]
    lag = {dict(labels)["group_id"]: value for labels, value in served.items()}
    assert lag[report.group] == sum(r["share_lag"] for r in rows.values())


def _below_start(kafka: Any, state_dir: Path, report: ShareGroupReport) -> Any:
    """The truth of the records below the share group's newest sampled start offsets: the
    ones its pipeline claims."""
    starts = newest_start_offsets(state_dir, report.group)
    source = [
        r
        for r in read_records(kafka.bootstrap_servers, report.source_topic)
        if r.offset < starts.get((report.source_topic, r.partition), 0)
    ]
    sink = read_records(kafka.bootstrap_servers, report.sink_topic)
    return delivery(source, sink, sink_by_key=False, filtered=False)


@pytest.mark.integration
@pytest.mark.slow
def test_share_group_pipelines_are_judged_exactly_by_deadline(
    kafka: Any, spark: Any, share_group_runs: ShareGroupRuns
) -> None:
    runs = share_group_runs
    redelivering, losing = runs.redelivering, runs.losing
    assert redelivering.caught_up and losing.caught_up
    append_pipeline(
        runs.config_path, _declared(redelivering, "share-redelivering", "at-least-once")
    )
    append_pipeline(runs.config_path, _declared(losing, "share-acknowledge-first", "at-most-once"))
    job = AnalysisJob(
        load_config(runs.config_path), kafka.bootstrap_servers, "local[2]", spark=spark
    )
    job.progress = lambda line: None
    job.run_once()
    truths = _truths(kafka, runs)

    truth = truths[redelivering.order]
    row = pipeline_verdict(runs.state_dir, "share-redelivering")
    assert row["records_checked"] == MESSAGES
    assert row["duplicate_copies"] == truth.duplicates == redelivering.killed_records > 0
    assert row["lost"] == len(truth.lost) == 0
    assert (row["achieved"], row["meets_declared"]) == (Achieved.AT_LEAST_ONCE.value, True)
    extra = [
        r
        for r in duplicates_rows(runs.state_dir / PUBLISHED_FILE, redelivering.sink_topic)
        if r["is_extra_copy"] and r["pipeline"] == "share-redelivering"
    ]
    assert len(extra) == truth.duplicates
    assert {r["cause"] for r in extra} == {DuplicateCause.REPROCESSING.value}

    truth = truths[losing.order]
    row = pipeline_verdict(runs.state_dir, "share-acknowledge-first")
    assert row["records_checked"] == MESSAGES
    assert row["lost"] == len(truth.lost) == losing.killed_records > 0
    assert row["causes"] == {
        (LossCause.NOT_IN_SINK_WITHIN_MAX_DELAY.value, "default"): len(truth.lost)
    }
    assert row["duplicate_copies"] == truth.duplicates == 0
    assert (row["achieved"], row["meets_declared"]) == (Achieved.AT_MOST_ONCE.value, True)
    print(
        f"\nshare groups by deadline: produce-first {redelivering.killed_records} copied "
        f"twice (dgm {len(extra)} duplicates, broker redelivered {redelivering.redelivered}); "
        f"acknowledge-first {losing.killed_records} lost (dgm {row['lost']})"
    )


@pytest.mark.integration
@pytest.mark.slow
def test_kafkas_console_share_consumer_without_headers_is_judged_by_its_acknowledgements(
    kafka: Any, spark: Any, share_group_runs: ShareGroupRuns, tmp_path: Path
) -> None:
    """Kafka's own tools, no dgm header anywhere: the console share consumer piped into the
    console producer, its consumer SIGKILLed twice while records flow. dgm's claim reads the
    share group's start offsets: every record below them is in the sink, and dgm's duplicates
    are the truth's extra copies, each one a redelivery. (The console share consumer
    acknowledges a poll's records when it next polls, so a kill finds few printed and
    unacknowledged: two kills left 6 in one run on this machine, none in another.)"""
    report = share_group_runs.console
    assert [k["returncode"] for k in report.kills] == [-9, -9]
    config_path = tmp_path / "dgm.toml"
    config_path.write_text(share_group_runs.config_path.read_text().split("[[pipelines]]")[0])
    append_pipeline(
        config_path,
        PipelineConfig(
            name="console-share",
            source_topics=(report.source_topic,),
            sink_topics=(report.sink_topic,),
            consumer_group=report.group_id,
            declared_semantic="at-least-once",
            message_id=MessageIdRule("json_field", "id"),
        ),
    )
    job = AnalysisJob(load_config(config_path), kafka.bootstrap_servers, "local[2]", spark=spark)
    job.progress = lambda line: None
    job.run_once()
    source = read_records(kafka.bootstrap_servers, report.source_topic)
    sink = read_records(kafka.bootstrap_servers, report.sink_topic)
    assert all(not r.headers for r in source + sink), "Kafka's tools stamp no header"
    starts = newest_start_offsets(share_group_runs.state_dir, report.group_id)
    claimed = [r for r in source if r.offset < starts.get((report.source_topic, r.partition), 0)]
    sunk = {id_of(r) for r in sink}
    extra_truth = len(sink) - len(sunk)

    row = pipeline_verdict(share_group_runs.state_dir, "console-share")
    assert row["claim"] == Claim.SHARE_ACKNOWLEDGEMENTS.value
    assert row["records_checked"] == len(claimed) > 0
    assert row["lost"] == len({id_of(r) for r in claimed} - sunk) == 0
    extra = [
        r
        for r in duplicates_rows(share_group_runs.state_dir / PUBLISHED_FILE, report.sink_topic)
        if r["is_extra_copy"]
    ]
    assert row["duplicate_copies"] == len(extra) == extra_truth
    assert {r["cause"] for r in extra} <= {DuplicateCause.REDELIVERY.value}, {
        r["evidence"] for r in extra
    }
    # Two kills may leave no printed record unacknowledged: then nothing was copied twice.
    achieved = Achieved.AT_LEAST_ONCE if extra_truth else Achieved.EXACTLY_ONCE
    assert (row["achieved"], row["meets_declared"]) == (achieved.value, True)
    print(
        f"\nconsole share consumer, no headers: {extra_truth} extra copies, dgm {len(extra)} "
        f"redeliveries; {len(claimed)} of {len(source)} records below the start offsets, 0 "
        f"lost; evidence {sorted({r['evidence'] for r in extra})[:2]}"
    )
