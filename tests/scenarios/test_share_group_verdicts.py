"""Pipelines whose processor is a share-group consumer (KIP-932), judged by `dgm analyze`.

A share group commits no offsets, so the group claim has nothing to read; the deadline claim
judges it (every record older than max_delay must be in the sink). The session's two runs
(`share_group_runs`, tests/support/share_group_run.py): the relay that produces before it
acknowledges, SIGKILLed twice, is at-least-once by redelivery, and dgm's duplicates are the
truth's (a plain read of its topics), each one reprocessing; the relay that acknowledges
first is at-most-once, and dgm's lost records are the truth's."""

from __future__ import annotations

from typing import Any

import pytest

from dgm.config.loader import append_pipeline, load_config
from dgm.config.pipelines import PipelineConfig, Semantic
from dgm.contracts.published import PUBLISHED_FILE
from dgm.contracts.vocabulary import Achieved, DuplicateCause, LossCause
from lab.share_group import ShareGroupReport
from spark_jobs.job import AnalysisJob
from tests.support.header_free import duplicates_rows
from tests.support.published_lab import pipeline_verdict
from tests.support.share_group_run import MAX_DELAY, MESSAGES, ShareGroupRuns
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

    truths = {}
    for report in (redelivering, losing):
        source = read_records(kafka.bootstrap_servers, report.source_topic)
        sink = read_records(kafka.bootstrap_servers, report.sink_topic)
        truths[report.order] = delivery(source, sink, sink_by_key=False, filtered=False)

    truth = truths[redelivering.order]
    row = pipeline_verdict(runs.state_dir, "share-redelivering")
    assert row["records_checked"] == MESSAGES
    assert row["duplicate_copies"] == truth.duplicates == redelivering.killed_records > 0
    assert row["lost"] == len(truth.lost) == 0
    assert (row["achieved"], row["meets_declared"]) == (Achieved.AT_LEAST_ONCE.value, True)
    extra = [
        r
        for r in duplicates_rows(runs.state_dir / PUBLISHED_FILE, redelivering.sink_topic)
        if r["is_extra_copy"]
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
