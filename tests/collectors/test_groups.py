from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from collectors.clients import Clients
from collectors.cycle import utc_now
from collectors.events import Event, group_events
from collectors.groups import GroupSample, fetch_groups, group_offsets_rows
from collectors.offsets import fetch_offsets
from collectors.partitions import PartitionInfo
from dgm.util.waiting import wait_until
from tests.support.transactional import in_transaction, send, transactional_producer

_CLIENTS: dict[str, Clients] = {}


def clients(kafka: Any) -> Clients:
    """The collectors' clients of the session's cluster (one, like the collector's own)."""
    if kafka.bootstrap_servers not in _CLIENTS:
        _CLIENTS[kafka.bootstrap_servers] = Clients(kafka.client_config(), 10)
    return _CLIENTS[kafka.bootstrap_servers]


def commit(kafka: Any, group_id: str, topic: str, offset: int) -> None:
    consumer = Consumer(kafka.client_config(**{"group.id": group_id}))
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def lags(kafka: Any, group_id: str, topic: str) -> tuple[int | None, int | None, int]:
    at = utc_now()
    groups = fetch_groups(clients(kafka), 10, at, "c")
    fetched, _ = fetch_offsets(kafka.admin(), [PartitionInfo(topic, 0, 1)], 10)
    by_key = {(p.topic, p.partition): p for p in fetched}
    (row,) = [r for r in group_offsets_rows(groups, by_key, at, "c") if r.group_id == group_id]
    assert (row.topic, row.partition, row.member_id) == (topic, 0, None)
    return row.lag_from_hw, row.lag_from_lso, fetched[0].high_watermark - fetched[0].lso


def test_lag_from_lso_differs_from_lag_from_hw_by_what_sits_past_the_lso(kafka: Any) -> None:
    topic = kafka.new_topic("coll-lag-tx")
    first = transactional_producer(kafka)
    first.begin_transaction()
    send(first, topic, 5)
    first.commit_transaction(30)  # 0-4, marker 5
    in_transaction(first, topic, 3)  # open: 6-8, pins the LSO at 6
    second = transactional_producer(kafka)
    second.begin_transaction()
    send(second, topic, 2)  # 9-10
    second.commit_transaction(30)  # marker 11, behind the open transaction
    group_id = f"g-{uuid.uuid4().hex[:8]}"
    commit(kafka, group_id, topic, 6)  # a read_committed consumer that read all it can

    def settled() -> tuple[int | None, int | None, int] | None:
        found = lags(kafka, group_id, topic)
        return found if found[0] == 6 else None  # the second commit marker is written

    lag_hw, lag_lso, lso_lag = wait_until(settled, 30, "the second commit marker")
    # From the high watermark: 3 open records, 2 committed records and 1 marker behind them.
    assert (lag_hw, lag_lso, lso_lag) == (6, 0, 6)
    assert lag_hw is not None and lag_lso is not None and lag_hw - lag_lso == lso_lag


def test_lag_both_ways_agree_on_a_plain_topic(kafka: Any) -> None:
    topic = kafka.new_topic("coll-lag-plain")
    producer = Producer(kafka.client_config())
    send(producer, topic, 10)
    group_id = f"g-{uuid.uuid4().hex[:8]}"
    commit(kafka, group_id, topic, 4)
    assert lags(kafka, group_id, topic) == (6, 6, 0)


def member_consumer(kafka: Any, group_id: str, topic: str, name: str) -> Consumer:
    consumer = Consumer(
        kafka.client_config(
            **{"group.id": group_id, "client.id": name, "session.timeout.ms": 10_000}
        )
    )
    consumer.subscribe([topic])
    return consumer


def test_members_joining_and_leaving_are_events(kafka: Any) -> None:
    topic = kafka.new_topic("coll-members", partitions=4)
    group_id = f"g-{uuid.uuid4().hex[:8]}"
    consumers = [member_consumer(kafka, group_id, topic, "first")]
    events: list[Event] = []
    previous: GroupSample | None = None

    def sample(members: int) -> GroupSample | None:
        """Poll the consumers, sample, derive events; the sample once the group is stable
        with `members` members that own all 4 partitions."""
        nonlocal previous
        for consumer in consumers:
            consumer.poll(0.1)
        at = utc_now()
        current = fetch_groups(clients(kafka), 10, at, "c")
        if previous is not None:
            events.extend(group_events(previous.views, current.views, at, "c"))
        previous = current
        view = current.views.get(group_id)
        owned = sum(len(m.assignment) for m in view.members.values()) if view else 0
        done = view and view.state == "Stable" and len(view.members) == members and owned == 4
        return current if done else None

    try:
        wait_until(lambda: sample(1), 60, "one stable member")
        events.clear()  # the group's creation is not a change of a group we knew
        consumers.append(member_consumer(kafka, group_id, topic, "second"))
        wait_until(lambda: sample(2), 60, "two stable members")
        joined = [e for e in events if e.event == "member_joined"]
        assert [e.client_id for e in joined] == ["second"]
        assert [e.group_id for e in events if e.event == "rebalance"][:1] == [group_id]
        assert not [e for e in events if e.event == "member_left"]

        events.clear()
        consumers.pop().close()  # leaves the group at once
        wait_until(lambda: sample(1), 60, "one stable member again")
        left = [e for e in events if e.event == "member_left"]
        assert [(e.client_id, e.member_id) for e in left] == [("second", joined[0].member_id)]
        assert any(e.event == "rebalance" for e in events)
    finally:
        for consumer in consumers:
            consumer.close()
