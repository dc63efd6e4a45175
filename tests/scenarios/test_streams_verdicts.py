"""The lab's Kafka Streams application (a plain Streams app, not written against dgm), SIGKILLed
while records flow, judged by a real `dgm analyze --once` run, against the truth of
tests/support/truth_records.py (a plain read of both topics, recomputing the app's declared rule).

One lab run per guarantee, each asserting several things:
- exactly_once_v2 with its drop-every-tenth filter declared to dgm as `expected`, judged with
  an id rule per side (the source's id in `$.id`, the sink's in the key the app writes):
  exactly-once, 0 duplicates, 0 lost, filtered = the truth's dropped count.
- at_least_once, every record delivered, ids by the forwarded dgm-id header: duplicate
  copies = the truth's, 0 lost; the forwarded dgm-producer/dgm-seq headers raise no sequence
  gap on the sink (producer-stage checks stay on source topics).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dgm.config.loader import append_pipeline, load_config
from dgm.config.pipelines import MessageIdRule, PipelineConfig
from lab.streams.app import Guarantee
from lab.streams.run import StreamsLabReport, StreamsLabSettings, run_streams_lab
from spark_jobs.job import AnalysisJob
from tests.support.published_lab import (
    collecting,
    offsets_samples,
    pipeline_verdict,
    wait_for_cycles,
)
from tests.support.strength import by_strength, only_at_full_strength
from tests.support.truth import read_records
from tests.support.truth_records import Delivery, delivery

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# At 100/s the kills land while records flow. CI: one kill into 1500 records (15 s), two for
# at_least_once; DGM_LONG=1: the three kills into 4000 (40 s).
MESSAGES = by_strength(1500, 4000)
KILLS = by_strength(1, 3)
# at_least_once commits every 3 s: a kill lands after most of a commit interval's output was
# sent, so it duplicates unless it falls within the producer's linger after a commit (a few
# percent of kills); two kills make a run without duplicates a one-in-a-thousand chance.
ALO_KILLS = by_strength(2, 3)
ALO_COMMIT_INTERVAL_MS = 3000
# The app's rule, said to dgm: a record whose integer "n" is a multiple of ten is not
# delivered (a value without an integer n makes it NULL: undecided, checked).
DROPS_TENTHS = "CAST(get_json_object(CAST(value AS STRING), '$.n') AS BIGINT) % 10 != 0"


def judged(
    kafka: Any,
    spark: Any,
    root: Path,
    guarantee: Guarantee,
    filtered: bool,
    kills: int = KILLS,
    commit_interval_ms: int | None = None,
    **pipeline: Any,
) -> tuple[StreamsLabReport, Delivery, dict[str, Any]]:
    """One lab run with the collectors sampling, then one analysis run: (report, truth, the
    pipeline's verdict row with its lost rows counted by cause)."""
    config_path = root / "dgm.toml"
    config_path.write_text(
        f'state_dir = "{root / "state"}"\n\n[analysis]\ngrace_s = 0\nwindow_s = 60\n'
    )
    with collecting(kafka.bootstrap_servers, load_config(config_path), interval_s=1.0):
        report = run_streams_lab(
            StreamsLabSettings(
                kafka.bootstrap_servers,
                root / "lab",
                guarantee,
                drop_every_tenth=filtered,
                messages=MESSAGES,
                rate=100.0,
                kills=kills,
                seed=27,
                commit_interval_ms=commit_interval_ms,
                progress=lambda line: None,
            )
        )
        assert report.caught_up, f"not caught up; see {report.run_dir}/logs"
        wait_for_cycles(root / "state", offsets_samples(root / "state") + 2)
    assert len(report.kills) == kills and all(k["returncode"] == -9 for k in report.kills)
    assert report.kills_while_producing >= 1
    name = f"streams-{guarantee}"
    append_pipeline(
        config_path,
        PipelineConfig(
            name=name,
            source_topics=(report.source_topic,),
            sink_topics=(report.sink_topic,),
            consumer_group=report.application_id,  # a Streams app's group
            declared_semantic="exactly-once" if guarantee == "exactly_once_v2" else "at-least-once",
            **pipeline,
        ),
    )
    config = load_config(config_path)
    job = AnalysisJob(config, kafka.bootstrap_servers, master="local[2]", spark=spark)
    job.progress = lambda line: None
    job.run_once()
    source = read_records(kafka.bootstrap_servers, report.source_topic)
    sink = read_records(kafka.bootstrap_servers, report.sink_topic)
    truth = delivery(source, sink, sink_by_key=True, filtered=filtered)
    return report, truth, pipeline_verdict(config.state_dir, name)


def test_exactly_once_v2_with_its_filter_declared_and_rekeyed_is_judged_exactly(
    kafka: Any, spark: Any, tmp_path: Path
) -> None:
    _, truth, row = judged(
        kafka,
        spark,
        tmp_path,
        "exactly_once_v2",
        filtered=True,
        expected=DROPS_TENTHS,
        source_message_id=MessageIdRule("json_field", "id"),
        sink_message_id=MessageIdRule("key", ""),
    )
    assert len(truth.dropped) == MESSAGES // 10 and truth.lost == frozenset()
    assert truth.duplicates == 0 and truth.unexpected == frozenset()
    assert (row["achieved"], row["meets_declared"]) == ("exactly-once", True)
    assert row["duplicate_copies"] == row["upstream_duplicates"] == 0
    assert row["lost"] == 0 and row["causes"] == {}
    assert row["filtered"] == len(truth.dropped)
    assert row["filter_undecided"] == 0
    assert row["records_checked"] == len(truth.expected)
    assert row["sink_records"] == sum(truth.sink_copies.values())
    assert row["unidentified"] == 0  # every id found: $.id at the source, the key at the sink


# The same verdict is asserted on a source without dgm's headers by
# test_causes_without_headers' Streams run, beside every copy's cause and the sink's order.
@only_at_full_strength
def test_at_least_once_killed_duplicates_equal_the_truth(
    kafka: Any, spark: Any, tmp_path: Path
) -> None:
    _, truth, row = judged(
        kafka,
        spark,
        tmp_path,
        "at_least_once",
        filtered=False,
        kills=ALO_KILLS,
        commit_interval_ms=ALO_COMMIT_INTERVAL_MS,
    )
    assert truth.lost == frozenset() and truth.unexpected == frozenset()
    assert truth.duplicates > 0, "SIGKILLs between produce and commit must duplicate"
    assert row["duplicate_copies"] == truth.duplicates
    assert row["upstream_duplicates"] == 0
    assert row["lost"] == 0 and row["causes"] == {}  # no sequence gap read on the sink's headers
    assert row["filtered"] == 0
    assert row["records_checked"] == len(truth.expected)
    assert (row["achieved"], row["meets_declared"]) == ("at-least-once", True)
