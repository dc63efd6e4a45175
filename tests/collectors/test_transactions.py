from __future__ import annotations

from typing import Any

import pytest

from collectors.clients import Clients
from collectors.cycle import utc_now
from collectors.events import Event, transactional_epoch_events
from collectors.partitions import ClusterView, PartitionInfo
from collectors.transactions import (
    TransactionSample,
    fetch_transactions,
    max_transaction_timeout_ms,
)
from dgm.util.waiting import wait_until
from tests.support.transactional import in_transaction, send, transactional_producer


@pytest.fixture
def clients(kafka: Any) -> Any:
    opened = Clients(kafka.client_config(), request_timeout_s=10)
    yield opened
    opened.close()


def sample(clients: Clients, topic: str, max_timeout_ms: int = 900_000) -> TransactionSample:
    view = ClusterView("c", frozenset({1}), (topic,), (PartitionInfo(topic, 0, 1),))
    return fetch_transactions(clients, view, max_timeout_ms, utc_now(), "c")


def test_open_transaction_shows_its_producer_and_start_offset(kafka: Any, clients: Any) -> None:
    topic = kafka.new_topic("coll-txn")
    producer = transactional_producer(kafka)
    producer.begin_transaction()
    send(producer, topic, 4)
    producer.commit_transaction(30)  # 0-3, marker 4
    in_transaction(producer, topic, 2)  # open from offset 5

    found = sample(clients, topic)
    (row,) = found.producers
    assert (row.topic, row.partition, row.txn_start_offset) == (topic, 0, 5)
    assert row.transactional_id is not None and row.transactional_id.startswith("tx-")
    assert (row.producer_epoch, row.hanging, row.hanging_reason) == (0, False, None)
    assert found.open_transactions() == 1
    (txn,) = [t for t in found.transactions if t.transactional_id == row.transactional_id]
    assert (txn.state, txn.producer_id, txn.timed_out) == ("Ongoing", row.producer_id, False)
    assert txn.partitions == [{"topic": topic, "partition": 0}]
    assert txn.open_ms is not None and txn.open_ms >= 0

    producer.commit_transaction(30)

    def committed() -> TransactionSample | None:
        found = sample(clients, topic)
        return found if found.open_transactions() == 0 else None

    after = wait_until(committed, 30, "the commit marker")
    assert after.producers[0].txn_start_offset is None


def test_a_transaction_left_open_is_aborted_by_kafka_and_the_sampler_sees_it(
    kafka: Any, clients: Any
) -> None:
    """What the broker does with a transaction left open past its timeout: the coordinator
    aborts it (within transaction.abort.timed.out.transaction.cleanup.interval.ms, 10 s by
    default) and bumps the producer's epoch. It never hangs, because its coordinator knows
    it; the sampler, with a find-hanging threshold lowered to 1 s, sees a candidate that
    find-hanging would not report, then the abort and the epoch bump."""
    topic = kafka.new_topic("coll-abandoned")
    producer = transactional_producer(kafka, **{"transaction.timeout.ms": 2000})
    in_transaction(producer, topic, 3)
    observed: list[TransactionSample] = []
    events: list[Event] = []

    def aborted() -> bool:
        current = sample(clients, topic, max_timeout_ms=1000)
        if observed:
            before = observed[-1].transactional_epochs()
            events.extend(
                transactional_epoch_events(before, current.transactional_epochs(), utc_now(), "c")
            )
        observed.append(current)
        return current.open_transactions() == 0

    wait_until(aborted, 60, "Kafka to abort the timed-out transaction", interval=0.3)
    first, last = observed[0], observed[-1]
    txn_id = first.producers[0].transactional_id
    assert txn_id is not None
    assert first.producers[0].txn_start_offset == 0
    states = [t.state for s in observed for t in s.transactions if t.transactional_id == txn_id]
    assert states[0] == "Ongoing" and states[-1] == "CompleteAbort", states
    assert not any(p.hanging for s in observed for p in s.producers)
    (row,) = last.producers
    assert (row.txn_start_offset, row.producer_epoch) == (None, 1)
    # The transactional ids sampled are the whole cluster's: on the session's broker another
    # test's transaction may time out meanwhile, and is told too (its own event).
    assert [(e.before, e.after) for e in events if e.transactional_id == txn_id] == [(0, 1)]
    if len(observed) > 2:  # sampled while open for > 1 s: a candidate, not hanging
        assert any(
            p.idle_ms is not None and p.idle_ms > 1000 and p.txn_start_offset == 0
            for s in observed[:-1]
            for p in s.producers
        )


def test_max_transaction_timeout_is_read_from_the_broker(kafka: Any, clients: Any) -> None:
    assert max_transaction_timeout_ms(clients.admin, 1, 10) == (900_000, None)  # the default
    assert max_transaction_timeout_ms(clients.admin, 999, 2) == (None, None)  # no such broker
