"""`dgm collect` through repeated broker restarts on 3 brokers, with consumer groups committing
meanwhile: the process never exits (librdkafka's coordinator-bound admin requests used to
abort it, collectors/group_requests.py), and group offsets keep being sampled.

The full run restarts brokers 10 times (DGM_LONG=1, about 5 minutes); CI restarts one once
(the fault suite restarts one more under the supervised collectors).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from dgm.contracts.samples import SampleStore
from dgm.util.waiting import wait_until
from tests.support.collect_process import collect_process, events, write_config
from tests.support.strength import by_strength

RESTARTS = by_strength(1, 10)


def keep_busy(bootstrap: str, topic: str, groups: list[str], stop: threading.Event) -> None:
    """A producer and one consumer per group, committing every few records, until `stop`."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    consumers = []
    for group in groups:
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
        )
        consumer.subscribe([topic])
        consumers.append(consumer)
    try:
        while not stop.wait(0.05):
            # BufferError: a broker is restarting; the queue drains later.
            with contextlib.suppress(BufferError):
                producer.produce(topic, b"v")
            producer.poll(0)
            for consumer in consumers:
                message = consumer.poll(0)
                if message is not None and not message.error():
                    consumer.commit(message=message, asynchronous=True)
    finally:
        for consumer in consumers:
            consumer.close()
        producer.flush(10)


def cycles(store: SampleStore, more: int) -> None:
    """Wait for `more` new group_offsets samples."""
    before = len(store.files("group_offsets"))
    wait_until(lambda: len(store.files("group_offsets")) >= before + more, 60, f"{more} cycles")


@pytest.mark.slow
def test_broker_restarts_never_end_the_collector(kafka3: Any, tmp_path: Path) -> None:
    cluster = kafka3.require_embedded()
    topic = kafka3.new_topic("restarts", partitions=6)
    groups = [f"restarts-{uuid.uuid4().hex[:6]}-{n}" for n in range(3)]
    config = write_config(tmp_path, kafka3.bootstrap_servers)
    store = SampleStore(tmp_path / "state")
    stop = threading.Event()
    busy = threading.Thread(
        target=keep_busy, args=(kafka3.bootstrap_servers, topic, groups, stop), daemon=True
    )
    busy.start()
    stderr = tmp_path / "stderr.log"

    def sampled_groups() -> set[str]:
        return set(store.read("group_offsets").column("group_id").to_pylist())

    args = ("--interval", "0.5", "--request-timeout", "3")
    try:
        with collect_process(config, stderr, *args) as collector:
            wait_until(lambda: set(groups) <= sampled_groups(), 90, "every group's offsets")
            for restart in range(RESTARTS):
                node = restart % 3 + 1
                cluster.stop_broker(node, kill=True)
                # Sampling goes on with a broker down (coordinators move), then after it is back.
                cycles(store, more=1)
                assert collector.poll() is None, (f"restart {restart + 1}", stderr.read_text())
                cluster.start_broker(node)
                cycles(store, more=2)
                assert collector.poll() is None, (f"restart {restart + 1}", stderr.read_text())
            collector.send_signal(signal.SIGTERM)
            assert collector.wait(timeout=60) == 0, stderr.read_text()
    finally:
        stop.set()
        busy.join(30)
    recorded = events(store)
    assert recorded.count("collector_start") == 1  # one process from start to end
    assert recorded.count("broker_left") >= RESTARTS, recorded
    assert "Traceback" not in stderr.read_text()
