"""Transactional writes with known offsets, for the collector tests."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import Producer


def transactional_producer(kafka: Any, **extra: Any) -> Producer:
    producer = Producer(
        kafka.client_config(**{"transactional.id": f"tx-{uuid.uuid4().hex[:10]}", **extra})
    )
    producer.init_transactions(30)
    return producer


def send(producer: Producer, topic: str, count: int, partition: int = 0) -> None:
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


def in_transaction(producer: Producer, topic: str, count: int, partition: int = 0) -> None:
    """Opens a transaction with `count` records and leaves it open."""
    producer.begin_transaction()
    send(producer, topic, count, partition)
