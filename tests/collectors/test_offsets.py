from __future__ import annotations

from datetime import timedelta
from typing import Any

from confluent_kafka import TopicPartition

from collectors.cycle import utc_now
from collectors.offsets import fetch_offsets, offsets_rows
from collectors.partitions import PartitionInfo
from dgm.util.waiting import wait_until
from tests.support.transactional import in_transaction, send, transactional_producer


def offsets_of(kafka: Any, topic: str) -> Any:
    fetched, unavailable = fetch_offsets(kafka.admin(), [PartitionInfo(topic, 0, 1)], 10)
    assert unavailable == 0
    return fetched[0]


def test_open_transaction_pins_the_lso_until_it_commits(kafka: Any) -> None:
    topic = kafka.new_topic("coll-off")
    producer = transactional_producer(kafka)
    producer.begin_transaction()
    send(producer, topic, 5)
    producer.commit_transaction(30)  # records 0-4, commit marker at 5
    in_transaction(producer, topic, 5)  # open: records 6-10

    first_at = utc_now()
    first = offsets_of(kafka, topic)
    assert (first.log_start_offset, first.lso, first.high_watermark) == (0, 6, 11)
    rows, state = offsets_rows([first], {}, first_at, "c")
    assert (rows[0].lso_lag, rows[0].lso_stuck_ms) == (5, 0)

    second_at = first_at + timedelta(seconds=7)  # the derivation takes the time it is given
    rows, state = offsets_rows([offsets_of(kafka, topic)], state, second_at, "c")
    assert (rows[0].lso_lag, rows[0].lso_since, rows[0].lso_stuck_ms) == (5, first_at, 7000)

    producer.commit_transaction(30)
    # commit_transaction returns before the marker is written: wait for the LSO to move.
    after = wait_until(
        lambda: (o := offsets_of(kafka, topic)).lso == 12 and o, 30, "the commit marker"
    )
    rows, _ = offsets_rows([after], state, second_at + timedelta(seconds=1), "c")
    assert (rows[0].high_watermark, rows[0].lso_lag, rows[0].lso_stuck_ms) == (12, 0, 0)


def test_log_start_offset_follows_deleted_records(kafka: Any) -> None:
    topic = kafka.new_topic("coll-del")
    producer = transactional_producer(kafka)
    producer.begin_transaction()
    send(producer, topic, 10)
    producer.commit_transaction(30)
    result = kafka.admin().delete_records([TopicPartition(topic, 0, 4)])
    next(iter(result.values())).result(timeout=30)
    found = offsets_of(kafka, topic)
    assert (found.log_start_offset, found.high_watermark) == (4, 11)


def test_a_partition_that_does_not_answer_is_counted_not_fatal(kafka: Any) -> None:
    topic = kafka.new_topic("coll-miss")
    partitions = [PartitionInfo(topic, 0, 1), PartitionInfo(f"{topic}-deleted", 0, 1)]
    fetched, unavailable = fetch_offsets(kafka.admin(), partitions, 5)
    assert [(p.topic, p.high_watermark) for p in fetched] == [(topic, 0)]
    assert unavailable == 1
