"""Records written to a real topic with dgm's headers: plain ones, and committed, aborted and
unidentified ones with the wait until the abort marker has landed."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from dgm.util.waiting import wait_until


def plain(kafka: Any, topic: str, *values: str) -> None:
    producer = Producer(kafka.client_config(acks="all"))
    for value in values:
        producer.produce(topic, value=value, headers=[("dgm-id", value)])
    assert producer.flush(30) == 0


def produce_committed_aborted_and_unidentified(kafka: Any, topic: str) -> None:
    producer = Producer(kafka.client_config(**{"transactional.id": f"fp-{uuid.uuid4().hex}"}))
    producer.init_transactions(30)
    seq = 0
    for end, label in ((producer.commit_transaction, "kept"), (producer.abort_transaction, "gone")):
        producer.begin_transaction()
        for i in range(3):
            stamped: list[tuple[str, str | bytes | None]] = [
                ("dgm-id", f"{label}-{i}"),
                ("dgm-producer", "p1"),
                ("dgm-seq", str(seq)),
            ]
            producer.produce(topic, value=f"{label}-{i}", headers=stamped)
            seq += 1
        producer.flush(30)  # abort_transaction purges what was not sent yet: send it first
        end(30)
    plain = Producer(kafka.client_config(acks="all"))
    for value in ("anonymous-0", "anonymous-1"):
        plain.produce(topic, value=value, headers=[("dgm-seq", "not-a-number")])
    assert plain.flush(30) == 0


def wait_for_stable_end(kafka: Any, topic: str) -> None:
    """Until the abort marker lands the LSO stays below the high watermark, and a
    read_committed view of "latest" would stop short of the later records."""
    partition = TopicPartition(topic, 0)

    def end(isolation: IsolationLevel) -> int:
        offsets = kafka.admin().list_offsets(
            {partition: OffsetSpec.latest()}, isolation_level=isolation
        )
        return int(offsets[partition].result(timeout=10).offset)

    wait_until(
        lambda: end(IsolationLevel.READ_COMMITTED) == end(IsolationLevel.READ_UNCOMMITTED) == 10,
        30,
        f"{topic}'s LSO to reach its high watermark (10)",
    )
