"""The lab's processor that commits no offsets anywhere Kafka can see (lab/no_offsets.py),
SIGKILLed 3 times at-most-once, judged by `dgm analyze` with claim = "deadline": its lost ids
equal the truth's (a plain read of its topics), and so do its late records; records younger
than max_delay are pending, not judged.

Two analysis runs of one AnalysisJob: the first as of a moment when half the records were
younger than max_delay, the second as of now (the engine follows the moved deadline). The run
is the session's (`no_offsets_run`, tests/support/no_offsets_run.py), which the lab's own test
of the processor reads too (tests/lab/test_no_offsets.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from dgm.config.loader import append_pipeline, load_config
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.vocabulary import Achieved, Claim, LossCause
from spark_jobs.job import AnalysisJob
from tests.support.no_offsets_run import MAX_DELAY, MESSAGES, NoOffsetsRun
from tests.support.published_lab import pipeline_verdict
from tests.support.truth import Record, read_records
from tests.support.truth_records import delivery


def late_ids(source: list[Record], sink: list[Record], before_ms: float) -> set[str]:
    """Ids of source records timestamped before `before_ms` whose first sink copy is
    timestamped later than the record + MAX_DELAY."""
    sent = {r.header_id: r.timestamp_ms for r in source}
    first: dict[str, int] = {}
    for r in sink:
        assert r.timestamp_ms is not None
        first[r.header_id] = min(first.get(r.header_id, r.timestamp_ms), r.timestamp_ms)
    delay_ms = MAX_DELAY.total_seconds() * 1000
    return {
        i
        for i, at in sent.items()
        if at is not None and at < before_ms and i in first and first[i] > at + delay_ms
    }


@pytest.mark.integration
@pytest.mark.slow
def test_no_offsets_processor_is_judged_by_deadline(
    kafka: Any, spark: Any, no_offsets_run: NoOffsetsRun
) -> None:
    report, state_dir, config_path = (
        no_offsets_run.report, no_offsets_run.state_dir, no_offsets_run.config_path
    )  # fmt: skip
    assert report.caught_up and len(report.crashes) == 3
    assert all(c["returncode"] == -9 for c in report.crashes)
    name = "no-offsets"
    append_pipeline(
        config_path,
        PipelineConfig(
            name=name,
            source_topics=(report.source_topic,),
            sink_topics=(report.sink_topic,),
            declared_semantic="at-most-once",
            claim="deadline",
            max_delay="4s",
        ),
    )
    source = read_records(kafka.bootstrap_servers, report.source_topic)
    sink = read_records(kafka.bootstrap_servers, report.sink_topic)
    truth = delivery(source, sink, sink_by_key=False, filtered=False)
    assert truth.source == MESSAGES and truth.duplicates == 0
    assert len(truth.lost) == report.claimed_lost > 0  # at-most-once: the kills lost batches
    stamps = sorted(r.timestamp_ms or 0 for r in source)
    sent_at = {r.header_id: r.timestamp_ms or 0 for r in source}

    job = AnalysisJob(load_config(config_path), kafka.bootstrap_servers, "local[2]", spark=spark)
    job.progress = lambda line: None
    # As of when the middle record was max_delay old: the younger half is pending.
    middle_ms = stamps[len(stamps) // 2]
    then = datetime.fromtimestamp(middle_ms / 1000, UTC) + MAX_DELAY
    job.run_once(now=then)
    first = pipeline_verdict(state_dir, name)
    checked = sum(1 for at in stamps if at < middle_ms)
    assert MESSAGES // 3 < checked < MESSAGES
    assert first["records_checked"] == checked
    assert first["lost"] == len({i for i in truth.lost if sent_at[i] < middle_ms})
    assert first["late_records"] == len(late_ids(source, sink, middle_ms))

    job.run_once()
    row = pipeline_verdict(state_dir, name)
    assert row["records_checked"] == MESSAGES
    assert row["lost"] == len(truth.lost) == report.claimed_lost
    assert row["causes"] == {
        (LossCause.NOT_IN_SINK_WITHIN_MAX_DELAY.value, "default"): len(truth.lost)
    }
    assert row["late_records"] == len(late_ids(source, sink, float("inf")))
    assert row["duplicate_copies"] == 0 and row["aborted_reads"] == 0
    assert (row["achieved"], row["meets_declared"]) == (Achieved.AT_MOST_ONCE.value, True)
    assert (row["claim"], row["claim_detail"]) == (Claim.DEADLINE.value, "max_delay 4s")
    assert row["consumer_group"] is None
    print(
        f"\nno-offsets by deadline: {row['records_checked']} checked, {row['lost']} lost "
        f"(truth {len(truth.lost)}), {row['late_records']} late; first run: "
        f"{first['records_checked']} checked, {first['lost']} lost"
    )
