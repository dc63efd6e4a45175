"""MirrorMaker 2 between two real clusters through SIGKILLs (or stopped for good), against an
independent read of the source on cluster a and the replica on cluster b (read_committed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.ledger import read_ledger
from lab.mirror.run import Fault, MirrorLabReport, MirrorLabSettings, run_mirror_lab
from tests.support.kafka_cluster import KafkaUnderTest
from tests.support.strength import by_strength, only_at_full_strength
from tests.support.truth import read_records
from tests.support.truth_records import Delivery, delivery

# tests/spark_jobs/test_{streams,mirror}_verdicts.py run these apps against the same truth.
pytestmark = [pytest.mark.integration, pytest.mark.slow, only_at_full_strength]

# CI: one kill into 1200 records; DGM_LONG=1: the three kills into 3000.
KILLS = by_strength(1, 3)
MESSAGES = by_strength(1200, 3000)


def run(
    kafka: KafkaUnderTest,
    second_kafka: KafkaUnderTest,
    tmp_path: Path,
    fault: Fault,
    exactly_once: bool,
) -> tuple[MirrorLabReport, Delivery]:
    report = run_mirror_lab(
        MirrorLabSettings(
            kafka.bootstrap_servers,
            second_kafka.bootstrap_servers,
            tmp_path,
            fault=fault,
            exactly_once=exactly_once,
            messages=MESSAGES,
            rate=150.0,
            kills=KILLS,
            seed=27,
        )
    )
    assert report.messages["acked"] == MESSAGES
    assert report.exits == [], f"MirrorMaker 2 died on its own; see {report.run_dir}/logs"
    source = read_records(kafka.bootstrap_servers, report.source_topic)
    replica = read_records(second_kafka.bootstrap_servers, report.replica_topic)
    assert len(source) == MESSAGES
    truth = delivery(source, replica, sink_by_key=False, filtered=False)
    assert truth.unexpected == frozenset()  # b holds copies of a's records and nothing else
    # Every replica record is a source id's first copy or one of its extra copies.
    assert len(replica) == len(set(truth.sink_copies)) + truth.duplicates
    return report, truth


def assert_killed(report: MirrorLabReport) -> None:
    assert report.caught_up, f"not caught up; see {report.run_dir}/logs"
    assert len(report.kills) == KILLS
    assert all(k["returncode"] == -9 for k in report.kills)
    assert report.kills_while_producing >= 1


def test_killed_mid_replication_loses_nothing_and_counts_its_copies(
    kafka: KafkaUnderTest, second_kafka: KafkaUnderTest, tmp_path: Path
) -> None:
    report, truth = run(kafka, second_kafka, tmp_path, "kill", exactly_once=False)
    assert_killed(report)
    assert truth.lost == frozenset()
    assert truth.duplicates >= 0
    assert sum(truth.sink_copies.values()) == truth.source + truth.duplicates


def test_exactly_once_killed_copies_every_record_once(
    kafka: KafkaUnderTest, second_kafka: KafkaUnderTest, tmp_path: Path
) -> None:
    report, truth = run(kafka, second_kafka, tmp_path, "kill", exactly_once=True)
    assert_killed(report)
    assert truth.lost == frozenset()
    assert truth.duplicates == 0
    assert sum(truth.sink_copies.values()) == truth.source == len(truth.expected)


def test_stopped_for_good_misses_what_was_produced_after(
    kafka: KafkaUnderTest, second_kafka: KafkaUnderTest, tmp_path: Path
) -> None:
    report, truth = run(kafka, second_kafka, tmp_path, "stop", exactly_once=False)
    assert report.stopped_at is not None and report.kills == []
    after_stop = {
        e.message_id
        for e in read_ledger(Path(report.ledger_path)).entries
        if e.event == "sent" and e.at > report.stopped_at
    }
    assert len(after_stop) > MESSAGES // 2  # the stop came early in the run
    assert after_stop <= truth.lost  # none of them reached b
    assert 0 < len(truth.sink_copies) < MESSAGES  # b got the records replicated before
