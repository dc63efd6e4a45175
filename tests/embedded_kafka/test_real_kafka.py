"""The embedded broker is real Apache Kafka: transactions, LSO and control markers behave as
Kafka's, which is exactly what mocks and Kafka-compatible brokers get wrong."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, OffsetSpec

from dgm.util.ports import ephemeral_floor
from dgm.util.waiting import wait_until

# Every test gets its broker through `cluster` (request.getfixturevalue), where the marking by
# fixture (tests/conftest.py) cannot see it.
pytestmark = pytest.mark.integration
BATCH = 5


@pytest.fixture(params=["kafka", "kafka3"], ids=["1-broker", "3-brokers"])
def cluster(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


def offsets(cluster: Any, topic: str, isolation: IsolationLevel) -> int:
    tp = TopicPartition(topic, 0)
    result = cluster.admin().list_offsets({tp: OffsetSpec.latest()}, isolation_level=isolation)
    return int(result[tp].result(timeout=10).offset)


def consumer(cluster: Any, topic: str, isolation: str) -> Consumer:
    c = Consumer(
        cluster.client_config(
            **{
                "group.id": f"g-{uuid.uuid4().hex[:8]}",
                "isolation.level": isolation,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
    )
    c.assign([TopicPartition(topic, 0, 0)])
    return c


def drain_until_position(c: Consumer, topic: str, position: int) -> list[Any]:
    """Consume until the consumer's position reaches `position`; the records read on the way."""
    records: list[Any] = []

    def reached() -> bool:
        message = c.poll(0.2)
        if message is not None and message.error() is None:
            records.append(message)
        return bool(c.position([TopicPartition(topic, 0)])[0].offset >= position)

    wait_until(reached, 30, f"{topic} consumer to reach offset {position}", interval=0)
    return records


def send_batch(producer: Producer, topic: str, label: str) -> None:
    for i in range(BATCH):
        producer.produce(topic, key=f"{label}-{i}", value=f"{label}-{i}")
    producer.flush(10)


def test_idempotent_producer_writes_each_message_once(cluster: Any) -> None:
    topic = cluster.new_topic("idem")
    acked: list[int | None] = []
    producer = Producer(cluster.client_config(**{"enable.idempotence": True, "acks": "all"}))
    for i in range(100):
        producer.produce(topic, value=str(i), on_delivery=lambda e, m: acked.append(m.offset()))
    assert producer.flush(30) == 0
    assert sorted(offset for offset in acked if offset is not None) == list(range(100))
    assert len(acked) == 100
    assert offsets(cluster, topic, IsolationLevel.READ_UNCOMMITTED) == 100


def test_transactions_lso_and_control_markers(cluster: Any) -> None:
    topic = cluster.new_topic("txn")
    producer = Producer(cluster.client_config(**{"transactional.id": f"tx-{uuid.uuid4().hex[:8]}"}))
    producer.init_transactions(30)
    for label, end in (
        ("committed", producer.commit_transaction),
        ("aborted", producer.abort_transaction),
    ):
        producer.begin_transaction()
        send_batch(producer, topic, label)
        end(30)
    producer.begin_transaction()
    send_batch(producer, topic, "open")

    # committed 0-4, marker 5, aborted 6-10, marker 11, open 12-16: the LSO is pinned at 12.
    high_watermark = offsets(cluster, topic, IsolationLevel.READ_UNCOMMITTED)
    lso = offsets(cluster, topic, IsolationLevel.READ_COMMITTED)
    assert (high_watermark, lso) == (3 * BATCH + 2, 2 * BATCH + 2)

    committed_reader = consumer(cluster, topic, "read_committed")
    before = drain_until_position(committed_reader, topic, lso)
    assert [m.value() for m in before] == [f"committed-{i}".encode() for i in range(BATCH)]
    # It cannot read past the LSO while the transaction stays open: nothing more arrives.
    assert all(committed_reader.poll(0.3) is None for _ in range(5))
    assert committed_reader.position([TopicPartition(topic, 0)])[0].offset == lso

    producer.commit_transaction(30)
    # commit_transaction returns once the coordinator has prepared the commit; the marker is
    # written to the partition right after, and only then do LSO and high watermark meet.
    high_watermark = 3 * BATCH + 3
    wait_until(
        lambda: offsets(cluster, topic, IsolationLevel.READ_COMMITTED) == high_watermark,
        30,
        "the commit marker to move the LSO",
    )
    assert offsets(cluster, topic, IsolationLevel.READ_UNCOMMITTED) == high_watermark
    after = drain_until_position(committed_reader, topic, high_watermark)
    assert [m.value() for m in after] == [f"open-{i}".encode() for i in range(BATCH)]
    committed_reader.close()

    uncommitted_reader = consumer(cluster, topic, "read_uncommitted")
    everything = drain_until_position(uncommitted_reader, topic, high_watermark)
    uncommitted_reader.close()
    labels = [m.value().decode().split("-")[0] for m in everything]
    assert labels == ["committed"] * BATCH + ["aborted"] * BATCH + ["open"] * BATCH
    # Control markers take offsets 5, 11 and 17: records never sit there.
    seen = {m.offset() for m in everything}
    assert set(range(high_watermark)) - seen == {BATCH, 2 * BATCH + 1, 3 * BATCH + 2}


def test_three_brokers_keep_acks_all_writes_going_with_one_broker_down(kafka3: Any) -> None:
    cluster = kafka3.require_embedded()
    topic = kafka3.new_topic("isr", partitions=3)
    configs = kafka3.admin().describe_configs([ConfigResource("topic", topic)])
    topic_config = next(iter(configs.values())).result(timeout=10)
    assert topic_config["min.insync.replicas"].value == "2"
    replicas = kafka3.admin().list_topics(topic, timeout=10).topics[topic].partitions
    assert all(len(p.replicas) == 3 for p in replicas.values())

    cluster.stop_broker(3)
    try:
        delivered: list[Any] = []
        producer = Producer(kafka3.client_config(**{"acks": "all", "enable.idempotence": True}))
        for i in range(60):
            producer.produce(topic, value=str(i), on_delivery=lambda e, m: delivered.append(e))
        assert producer.flush(60) == 0
        assert delivered == [None] * 60  # every write acknowledged by the 2 in-sync replicas
    finally:
        cluster.start_broker(3)
    assert {n.node_id for n in cluster.running_nodes()} == {1, 2, 3}


def test_every_broker_port_is_one_the_kernel_never_hands_out(cluster: Any) -> None:
    """The FAULT listener's advertised port is listened on only while a test's proxy runs, and
    a broker's ports are free while it restarts: from the ephemeral range, any outgoing
    connection could take one as its source port meanwhile."""
    floor = ephemeral_floor()
    for node in cluster.require_embedded().nodes:
        ports = node.ports
        used = [ports.port, ports.controller_port, ports.fault_listen_port]
        assert all(port < floor for port in [*used, ports.fault_advertised_port]), ports
