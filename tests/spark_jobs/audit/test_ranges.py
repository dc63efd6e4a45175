"""Offset ranges to audit: from the audited end (or the log start) to the sampled LSO."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dgm.contracts.samples import PartitionOffsets, SampleStore
from spark_jobs.audit.offsets_samples import OffsetsSamples
from spark_jobs.audit.ranges import (
    OffsetRange,
    assign_json,
    has_open_or_recent_transaction,
    latest_offsets,
    offsets_json,
    plan_ranges,
    split_ranges,
    transactional_topics,
)

AT = datetime(2026, 1, 1, tzinfo=UTC)


def sampled(topic: str, partition: int, start: int, hw: int, lso: int) -> PartitionOffsets:
    return PartitionOffsets(topic, partition, start, hw, lso)


def test_a_new_partition_is_audited_from_its_log_start_to_its_lso() -> None:
    assert plan_ranges([sampled("t", 0, 5, 20, 12)], {}) == [OffsetRange("t", 0, 5, 12)]


def test_the_end_is_the_lso_not_the_high_watermark() -> None:
    (r,) = plan_ranges([sampled("t", 0, 0, 100, 40)], {("t", 0): 10})
    assert (r.start, r.end, r.size) == (10, 40, 30)


def test_nothing_new_or_an_lso_behind_the_audit_gives_no_range() -> None:
    samples = [sampled("t", 0, 0, 10, 10), sampled("t", 1, 0, 10, 3)]
    assert plan_ranges(samples, {("t", 0): 10, ("t", 1): 7}) == []


def test_offsets_deleted_by_retention_before_the_audit_are_reported_skipped() -> None:
    (r,) = plan_ranges([sampled("t", 0, 50, 80, 80)], {("t", 0): 30})
    assert r == OffsetRange("t", 0, 50, 80, skipped=20)
    # Retention below the audited end deletes nothing unaudited.
    (r,) = plan_ranges([sampled("t", 0, 20, 80, 80)], {("t", 0): 30})
    assert (r.start, r.skipped) == (30, 0)


def test_ranges_are_sorted_and_other_partitions_unaffected() -> None:
    found = plan_ranges(
        [sampled("u", 0, 0, 4, 4), sampled("t", 1, 0, 2, 2), sampled("t", 0, 0, 3, 3)],
        {("t", 1): 2},
    )
    assert [r.key for r in found] == [("t", 0), ("u", 0)]


def test_spark_option_json() -> None:
    ranges = [OffsetRange("t", 0, 1, 5), OffsetRange("t", 2, 0, 9), OffsetRange("u", 0, 3, 4)]
    assert json.loads(offsets_json(ranges, end=False)) == {"t": {"0": 1, "2": 0}, "u": {"0": 3}}
    assert json.loads(offsets_json(ranges, end=True)) == {"t": {"0": 5, "2": 9}, "u": {"0": 4}}
    assert json.loads(assign_json(ranges)) == {"t": [0, 2], "u": [0]}


def test_lso_below_high_watermark_flags_the_topic() -> None:
    samples = [sampled("t", 0, 0, 10, 10), sampled("u", 0, 0, 10, 7)]
    assert has_open_or_recent_transaction(samples) == {"u"}


def offsets_row(
    topic: str, partition: int, lso: int, hw: int, at: datetime = AT
) -> dict[str, object]:
    return {
        "sampled_at": at, "cluster_id": "c", "topic": topic, "partition": partition,
        "leader": 1, "log_start_offset": 0, "high_watermark": hw, "lso": lso,
        "lso_lag": hw - lso, "lso_since": AT, "lso_stuck_ms": 0,
    }  # fmt: skip


def producers_row(
    topic: str, txn_start: int | None, txn_id: str | None, coord: int
) -> dict[str, object]:
    return {
        "sampled_at": AT, "cluster_id": "c", "topic": topic, "partition": 0,
        "producer_id": 1, "producer_epoch": 0, "last_sequence": 3, "last_timestamp": AT,
        "coordinator_epoch": coord, "txn_start_offset": txn_start, "transactional_id": txn_id,
        "idle_ms": 0, "hanging": False, "hanging_reason": None,
    }  # fmt: skip


def test_latest_offsets_reads_newest_first_and_fills_in_from_older_files(tmp_path: Path) -> None:
    store = SampleStore(tmp_path)
    store.write("offsets", [offsets_row("t", 0, 1, 1), offsets_row("u", 0, 1, 1)])
    store.write("offsets", [offsets_row("t", 0, 5, 6), offsets_row("t", 1, 2, 2)])
    store.write("offsets", [offsets_row("t", 0, 9, 9), offsets_row("other", 0, 7, 7)])
    found = {(s.topic, s.partition): s.lso for s in latest_offsets(tmp_path, {"t", "u"})}
    # u is only in the oldest file, so the older ones are read and fill in t/1 as well.
    assert found == {("t", 0): 9, ("t", 1): 2, ("u", 0): 1}
    # Once every topic is seen, older files are not read: t/1 waits for the next cycle.
    assert [(s.topic, s.partition) for s in latest_offsets(tmp_path, {"t"})] == [("t", 0)]
    assert latest_offsets(tmp_path / "none", {"t"}) == []


def test_a_partition_is_held_up_to_the_sample_its_audited_offsets_come_from(
    tmp_path: Path,
) -> None:
    store = SampleStore(tmp_path)
    older, newer = AT, AT + timedelta(seconds=5)
    first = [offsets_row("t", 0, 1, 1, older), offsets_row("t", 1, 2, 2, older)]
    store.write("offsets", [*first, offsets_row("u", 0, 3, 3, older)])
    store.write("offsets", [offsets_row("t", 0, 5, 6, newer)])  # t/1's leader away
    wanted = {("t", 0), ("t", 1), ("u", 0)}
    # Only t is audited: the newest file holds it, so t/1 is not read this cycle (None).
    samples = OffsetsSamples(tmp_path, {"t"}, 5)
    assert [(s.topic, s.partition) for s in samples.latest()] == [("t", 0)]
    assert samples.last_sampled(wanted) == {("t", 0): newer, ("t", 1): None, ("u", 0): None}
    # u sends the audit to the older files: t/1 is read up to its older sample, and held so.
    both = OffsetsSamples(tmp_path, {"t", "u"}, 5)
    assert {(s.topic, s.partition) for s in both.latest()} == wanted
    assert both.last_sampled(wanted) == {("t", 0): newer, ("t", 1): older, ("u", 0): older}


def test_transactional_topics_from_the_producers_sample(tmp_path: Path) -> None:
    SampleStore(tmp_path).write(
        "producers",
        [
            producers_row("open", 4, None, -1),
            producers_row("named", None, "tx-1", -1),
            producers_row("marked", None, None, 0),
            producers_row("idempotent", None, None, -1),
        ],
    )
    topics = {"open", "named", "marked", "idempotent", "unsampled"}
    assert transactional_topics(tmp_path, topics) == {"open", "named", "marked"}


def test_a_first_start_records_the_offsets_before_it_and_stays_within_the_log() -> None:
    samples = [sampled("t", 0, 5, 20, 12), sampled("t", 1, 5, 20, 12), sampled("t", 2, 5, 9, 9)]
    found = plan_ranges(samples, {}, {("t", 0): 10, ("t", 1): 2, ("t", 2): 50})
    assert found == [
        OffsetRange("t", 0, 10, 12, before_start=5),
        OffsetRange("t", 1, 5, 12),  # a start below the log start is the log start
        OffsetRange("t", 2, 9, 9, before_start=4),  # empty, yet kept: the start is recorded
    ]


def test_a_first_start_is_ignored_once_the_partition_was_audited() -> None:
    (r,) = plan_ranges([sampled("t", 0, 0, 20, 20)], {("t", 0): 10}, {("t", 0): 18})
    assert r == OffsetRange("t", 0, 10, 20)
    assert plan_ranges([sampled("t", 0, 0, 20, 20)], {("t", 0): 20}, {("t", 0): 18}) == []


def test_chunks_cover_every_offset_once_and_read_every_partition() -> None:
    ranges = [OffsetRange("t", 0, 10, 1010), OffsetRange("t", 1, 0, 7), OffsetRange("u", 0, 3, 3)]
    chunks = split_ranges(ranges, 300)
    assert len(chunks) == 4
    covered: dict[tuple[str, int], list[int]] = {}
    for chunk in chunks:
        for r in chunk:
            covered.setdefault(r.key, []).extend(range(r.start, r.end))
    assert covered == {("t", 0): list(range(10, 1010)), ("t", 1): list(range(7))}
    assert all(sum(r.size for r in chunk) <= 300 for chunk in chunks)
    assert split_ranges(ranges, 10_000) == [
        [OffsetRange("t", 0, 10, 1010), OffsetRange("t", 1, 0, 7)]
    ]
    assert split_ranges([OffsetRange("u", 0, 3, 3)], 10) == []
