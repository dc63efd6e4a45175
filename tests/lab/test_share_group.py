"""The share-group relay (lab/share_group.py), SIGKILLed between its two steps: by an
independent read of its topics, the relay that produces before it acknowledges copied again
exactly the batches its kills left unacknowledged, which the broker redelivered, and lost
nothing; the one that acknowledges first lost exactly the batches its kills left unproduced,
and copied nothing twice. The runs are the session's (`share_group_runs`,
tests/support/share_group_run.py)."""

from __future__ import annotations

import pytest

from lab.killed_batches import KilledBatch
from lab.processors.share_relay import claims
from lab.share_group import ShareGroupReport
from tests.support.kafka_cluster import KafkaUnderTest
from tests.support.share_group_run import MESSAGES, ShareGroupRuns
from tests.support.truth import Record, read_records
from tests.support.truth_records import delivery


def test_a_batch_is_claimed_one_run_of_offsets_a_line() -> None:
    # Released records come back among new ones: a batch's offsets need not be contiguous.
    positions = [(0, 7), (0, 3), (1, 4), (0, 4), (0, 9), (1, 5), (2, 0)]
    assert claims(positions) == ["0:3-5,1:4-6,2:0-1", "0:7-8", "0:9-10"]
    assert claims([]) == []


def _ids(source: list[Record], batches: list[KilledBatch]) -> set[str]:
    at = {(r.partition, r.offset): r.header_id for r in source}
    return {
        at[(p, offset)]
        for b in batches
        for p, (first, end) in b.spans.items()
        for offset in range(first, end)
    }


def _checked(report: ShareGroupReport) -> None:
    assert report.caught_up, f"not caught up; see {report.run_dir}/logs"
    assert report.messages["acked"] == MESSAGES
    assert len(report.crashes) == 2
    assert all(c["returncode"] == -9 for c in report.crashes)


@pytest.mark.integration
@pytest.mark.slow
def test_killed_share_relays_duplicate_what_was_redelivered_and_lose_what_was_acknowledged(
    kafka: KafkaUnderTest, share_group_runs: ShareGroupRuns
) -> None:
    redelivering, losing = share_group_runs.redelivering, share_group_runs.losing
    for report in (redelivering, losing):
        _checked(report)

    source = read_records(kafka.bootstrap_servers, redelivering.source_topic)
    sink = read_records(kafka.bootstrap_servers, redelivering.sink_topic)
    truth = delivery(source, sink, sink_by_key=False, filtered=False)
    assert truth.source == MESSAGES and truth.lost == frozenset()
    assert all(c["phase"] == "produced" for c in redelivering.crashes)
    copied_twice = {i for i, n in truth.sink_copies.items() if n > 1}
    assert copied_twice == _ids(source, redelivering.killed_between)
    assert truth.duplicates == redelivering.killed_records > 0
    # The broker's delivery counts: every batch copied twice came back; records it had
    # handed over but the relay had not yet polled come back too, uncopied.
    assert redelivering.redelivered >= truth.duplicates

    source = read_records(kafka.bootstrap_servers, losing.source_topic)
    sink = read_records(kafka.bootstrap_servers, losing.sink_topic)
    truth = delivery(source, sink, sink_by_key=False, filtered=False)
    assert truth.source == MESSAGES and truth.duplicates == 0
    assert all(c["phase"] == "committed" for c in losing.crashes)
    assert truth.lost == _ids(source, losing.killed_between)
    assert len(truth.lost) == losing.killed_records > 0
