"""The Kafka Streams application through SIGKILLs, against an independent read of its topics."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.streams.app import Guarantee
from lab.streams.run import StreamsLabReport, StreamsLabSettings, run_streams_lab
from tests.support.kafka_cluster import KafkaUnderTest
from tests.support.strength import by_strength, only_at_full_strength
from tests.support.truth import read_records
from tests.support.truth_records import Delivery, delivery

# tests/spark_jobs/test_{streams,mirror}_verdicts.py run these apps against the same truth.
pytestmark = [pytest.mark.integration, pytest.mark.slow, only_at_full_strength]

# CI: one kill into 1500 records; DGM_LONG=1: the three kills into 4000.
KILLS = by_strength(1, 3)
MESSAGES = by_strength(1500, 4000)


def run(
    kafka: KafkaUnderTest,
    tmp_path: Path,
    guarantee: Guarantee,
    filtered: bool,
    commit_interval_ms: int | None = None,
) -> tuple[StreamsLabReport, Delivery]:
    report = run_streams_lab(
        StreamsLabSettings(
            kafka.bootstrap_servers,
            tmp_path,
            guarantee,
            drop_every_tenth=filtered,
            messages=MESSAGES,
            rate=100.0,
            kills=KILLS,
            seed=27,
            commit_interval_ms=commit_interval_ms,
        )
    )
    assert report.caught_up, f"not caught up; see {report.run_dir}/logs"
    assert report.messages["acked"] == MESSAGES
    assert len(report.kills) == KILLS
    assert all(k["returncode"] == -9 for k in report.kills)
    assert report.kills_while_producing >= 1
    source = read_records(kafka.bootstrap_servers, report.source_topic)
    sink = read_records(kafka.bootstrap_servers, report.sink_topic)
    assert len(source) == MESSAGES
    # Keyed by the id of the value; the header came along untouched.
    assert all(r.key == r.headers["dgm-id"] for r in sink)
    return report, delivery(source, sink, sink_by_key=True, filtered=filtered)


def test_exactly_once_v2_killed_delivers_every_record_once(
    kafka: KafkaUnderTest, tmp_path: Path
) -> None:
    _, truth = run(kafka, tmp_path, "exactly_once_v2", filtered=False)
    assert truth.lost == frozenset()
    assert truth.duplicates == 0
    assert truth.unexpected == frozenset()
    assert sum(truth.sink_copies.values()) == truth.source == len(truth.expected)


def test_at_least_once_killed_loses_nothing_and_counts_its_copies(
    kafka: KafkaUnderTest, tmp_path: Path
) -> None:
    _, truth = run(kafka, tmp_path, "at_least_once", filtered=False, commit_interval_ms=1000)
    assert truth.lost == frozenset()
    assert truth.unexpected == frozenset()
    # Every sink record is an expected id's first copy or one of its duplicates.
    assert sum(truth.sink_copies.values()) == len(truth.expected) + truth.duplicates
    assert all(n >= 1 for n in truth.sink_copies.values())


def test_filter_drops_exactly_the_records_its_rule_excludes(
    kafka: KafkaUnderTest, tmp_path: Path
) -> None:
    _, truth = run(kafka, tmp_path, "exactly_once_v2", filtered=True)
    # The producer numbers its records from 0: every tenth one is excluded by the rule.
    assert len(truth.dropped) == MESSAGES // 10
    assert len(truth.expected) == MESSAGES - MESSAGES // 10
    assert truth.unexpected == frozenset()  # no dropped record reached the sink
    assert truth.lost == frozenset()
    assert truth.duplicates == 0
    assert sum(truth.sink_copies.values()) == truth.source - len(truth.dropped)
