"""The processor that commits no offsets, SIGKILLed after keeping its position: what it lost,
by an independent read of its topics, is what its kills left claimed and unproduced. The run
is the session's (`no_offsets_run`, tests/support/no_offsets_run.py), which the deadline
scenario judges too (tests/scenarios/test_no_offsets_deadline.py)."""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from lab.processors.position_file import format_claim, parse_claim
from tests.support.kafka_cluster import KafkaUnderTest
from tests.support.no_offsets_run import MESSAGES, NoOffsetsRun
from tests.support.truth import read_records
from tests.support.truth_records import delivery


def test_claim_lines_round_trip() -> None:
    assert parse_claim("claimed 7 0:5-9,2:0-3") == (7, {0: (5, 9), 2: (0, 3)})
    assert parse_claim("phase committed 7") is None
    assert format_claim([]) == ""


@pytest.mark.integration
@pytest.mark.slow
def test_killed_processor_loses_what_it_claimed_and_commits_nothing(
    kafka: KafkaUnderTest, no_offsets_run: NoOffsetsRun
) -> None:
    report = no_offsets_run.report
    assert report.caught_up, f"not caught up; see {report.run_dir}/logs"
    assert report.messages["acked"] == MESSAGES
    assert len(report.crashes) == 3
    assert all(c["returncode"] == -9 for c in report.crashes)

    source = read_records(kafka.bootstrap_servers, report.source_topic)
    sink = read_records(kafka.bootstrap_servers, report.sink_topic)
    truth = delivery(source, sink, sink_by_key=False, filtered=False)
    assert truth.source == MESSAGES
    assert truth.duplicates == 0  # at-most-once: nothing is read twice
    assert truth.unexpected == frozenset()
    # The records lost are exactly those of the batches killed between keeping the position
    # and producing (may be none, if no kill landed there).
    at = {(r.partition, r.offset): r.header_id for r in source}
    claimed = {
        at[(p, offset)]
        for claim in report.lost_claims
        for p, (first, end) in claim.spans.items()
        for offset in range(first, end)
    }
    assert truth.lost == claimed
    assert len(truth.lost) == report.claimed_lost

    # Nothing anywhere Kafka can see says what it processed: its group has no commits.
    request = ConsumerGroupTopicPartitions(
        report.group, [TopicPartition(report.source_topic, p) for p in range(3)]
    )
    answer = kafka.admin().list_consumer_group_offsets([request])[report.group].result(30)
    assert [tp.offset for tp in answer.topic_partitions] == [-1001] * 3
