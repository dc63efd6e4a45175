from __future__ import annotations

from datetime import UTC, datetime

from collectors.events import (
    Event,
    GroupView,
    MemberView,
    backwards_events,
    broker_events,
    capability_events,
    group_events,
    idempotent_epoch_events,
    topic_events,
    transactional_epoch_events,
)
from dgm.clients.capabilities import KIP848_GROUPS, SHARE_GROUPS, Gap
from dgm.contracts.samples import PartitionOffsets

AT = datetime(2025, 1, 1, tzinfo=UTC)


def member(member_id: str, *partitions: int) -> MemberView:
    return MemberView(member_id, f"client-{member_id}", frozenset(("t", p) for p in partitions))


def group(state: str, *members: MemberView) -> GroupView:
    return GroupView(state, {m.member_id: m for m in members})


def kinds(events: list[Event]) -> list[tuple[str, str | None]]:
    return [(e.event, e.member_id) for e in events]


def test_no_change_no_event() -> None:
    g = {"g": group("Stable", member("a", 0, 1))}
    assert group_events(g, g, AT, "c") == []


def test_a_member_joining_is_a_join_and_one_rebalance() -> None:
    before = {"g": group("Stable", member("a", 0, 1))}
    during = {"g": group("PreparingRebalance", member("a", 0, 1), member("b"))}
    after = {"g": group("Stable", member("a", 0), member("b", 1))}
    first = group_events(before, during, AT, "c")
    assert kinds(first) == [("member_joined", "b"), ("rebalance", None)]
    assert (first[1].before, first[1].after, first[1].group_id) == (1, 2, "g")
    # The assignment settles in the next sample: the same rebalance, not a second one.
    assert group_events(during, after, AT, "c") == []


def test_a_rebalance_quicker_than_the_interval_is_seen_from_the_assignment() -> None:
    before = {"g": group("Stable", member("a", 0), member("b", 1))}
    after = {"g": group("Stable", member("a", 0, 1), member("c"))}
    assert kinds(group_events(before, after, AT, "c")) == [
        ("member_joined", "c"),
        ("member_left", "b"),
        ("rebalance", None),
    ]


def test_the_last_member_leaving_is_a_departure_not_a_rebalance() -> None:
    before = {"g": group("Stable", member("a", 0))}
    after = {"g": group("Empty")}
    assert kinds(group_events(before, after, AT, "c")) == [("member_left", "a")]


def test_groups_seen_for_the_first_time_yield_nothing() -> None:
    assert group_events({}, {"g": group("Stable", member("a", 0))}, AT, "c") == []


def test_transactional_epoch_bumps() -> None:
    before = {"tx-a": (7, 0), "tx-b": (8, 3), "tx-c": (9, 1)}
    after = {"tx-a": (7, 1), "tx-b": (11, 0), "tx-c": (9, 1), "tx-new": (12, 0)}
    events = transactional_epoch_events(before, after, AT, "c")
    assert [(e.transactional_id, e.producer_id, e.before, e.after) for e in events] == [
        ("tx-a", 7, 0, 1),
        ("tx-b", 11, 3, 0),  # a new producer id fences the old session too
    ]
    assert "producer id 8 -> 11" in events[1].detail


def test_idempotent_epoch_bumps() -> None:
    events = idempotent_epoch_events({1: 0, 2: 4}, {1: 1, 2: 4, 3: 0}, AT, "c")
    assert [(e.producer_id, e.before, e.after) for e in events] == [(1, 0, 1)]


def test_brokers_leaving_and_joining() -> None:
    assert broker_events(None, frozenset({1, 2}), AT, "c") == []
    events = broker_events(frozenset({1, 2}), frozenset({2, 3}), AT, "c")
    assert [(e.event, e.broker_id) for e in events] == [("broker_left", 1), ("broker_joined", 3)]


def test_a_topic_whose_id_changed_was_recreated() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    before = {"orders": "id-1", "payments": "id-2", "gone": "id-3"}
    now = {"orders": "id-9", "payments": "id-2", "new": "id-4"}
    (event,) = topic_events(before, now, at, "c")
    assert (event.event, event.topic) == ("topic_recreated", "orders")
    assert "id-1 -> id-9" in event.detail
    assert topic_events({}, now, at, "c") == []  # the first sample knows no earlier id


def offsets(
    topic: str = "t", start: int = 0, hw: int = 10, lso: int = 10, epoch: int | None = 0
) -> PartitionOffsets:
    return PartitionOffsets(topic, 0, start, hw, lso, leader_epoch=epoch)


def test_a_high_watermark_and_lso_going_back_are_one_event_each() -> None:
    before = {("t", 0): offsets(hw=150, lso=150, epoch=0)}
    found = backwards_events(before, [offsets(hw=100, lso=100, epoch=1)], AT, "c")
    assert [(e.event, e.before, e.after, e.partition, e.leader_epoch) for e in found] == [
        ("high_watermark_backwards", 150, 100, 0, 1),
        ("lso_backwards", 150, 100, 0, 1),
    ]
    assert found[0].detail == "t[0]: high watermark went back from 150 to 100 (leader epoch 0 -> 1)"


def test_a_log_start_going_back_is_an_event_and_growth_is_none() -> None:
    before = {("t", 0): offsets(start=5, epoch=None)}
    (found,) = backwards_events(before, [offsets(start=2, hw=12, lso=11, epoch=3)], AT, "c")
    assert (found.event, found.before, found.after) == ("log_start_backwards", 5, 2)
    assert "leader epoch" not in found.detail  # the epoch before is unknown
    assert backwards_events(before, [offsets(start=5, hw=20, lso=20)], AT, "c") == []


def test_a_new_partition_or_a_recreated_topic_is_no_truncation() -> None:
    before = {("t", 0): offsets(hw=150, lso=150)}
    assert backwards_events({}, [offsets(hw=1, lso=1)], AT, "c") == []
    assert backwards_events(before, [offsets(hw=0, lso=0)], AT, "c", recreated={"t"}) == []


def test_a_capability_gap_is_told_once_and_its_end_after_an_upgrade() -> None:
    groups = Gap(KIP848_GROUPS, "default", "3.9", "has ConsumerGroupHeartbeat v0 only")
    shares = Gap(SHARE_GROUPS, "default", "3.9", "has no ShareGroupDescribe")
    first = capability_events([], [groups, shares], AT, "c")
    assert [(e.event, e.detail) for e in first] == [
        ("capability_missing", groups.line()),
        ("capability_missing", shares.line()),
    ]
    assert capability_events([groups, shares], [shares, groups], AT, "c") == []
    upgraded = capability_events([groups, shares], [shares], AT, "c")
    assert [(e.event, e.detail) for e in upgraded] == [("capability_restored", groups.line())]
