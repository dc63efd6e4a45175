"""The lab's processor that commits no offsets anywhere Kafka can see (lab/no_offsets.py),
SIGKILLed 3 times at-most-once, judged by `dgm analyze` with claim = "deadline": its lost ids
equal the truth's (a plain read of its topics), and so do its late records; records younger
than max_delay are pending, not judged.

Two analysis runs of one AnalysisJob: the first as of a moment when half the records were
younger than max_delay, the second as of now (the engine follows the moved deadline)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dgm.config.loader import append_pipeline, load_config
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.vocabulary import Achieved, Claim, LossCause
from dgm.util.waiting import wait_until
from lab.no_offsets import NoOffsetsSettings, run_no_offsets
from spark_jobs.job import AnalysisJob
from tests.support.published_lab import collecting, offsets_samples, pipeline_verdict
from tests.support.truth import Record, read_records
from tests.support.truth_records import delivery

MESSAGES = 1500
MAX_DELAY = timedelta(seconds=4)


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
def test_no_offsets_processor_is_judged_by_deadline(kafka: Any, spark: Any, tmp_path: Path) -> None:
    state_dir, config_path = tmp_path / "state", tmp_path / "dgm.toml"
    config_path.write_text(
        f'state_dir = "{state_dir}"\n\n[analysis]\ngrace_s = 0\nwindow_s = 60\nmin_records = 1\n'
    )
    settings = NoOffsetsSettings(
        kafka.bootstrap_servers, tmp_path / "lab", messages=MESSAGES, seed=27,
        progress=lambda line: None,
    )  # fmt: skip
    with collecting(kafka.bootstrap_servers, load_config(config_path), interval_s=1.0):
        report = run_no_offsets(settings)
        # Samples of the topics' ends, taken once every record is older than max_delay.
        ended = offsets_samples(state_dir) + 2
        settled = report.finished_at + MAX_DELAY.total_seconds()
        wait_until(
            lambda: offsets_samples(state_dir) >= ended and time.time() > settled,
            60,
            "collector samples after the run and max_delay",
        )
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
