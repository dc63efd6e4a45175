"""`dgm watch` on a real broker: the extra copies it publishes are exactly the sink's (none
from an aborted transaction or an unidentified record), in time, and kept across a restart."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from dgm.config.document import DgmConfig
from dgm.config.pipelines import MessageIdRule
from dgm.util.waiting import wait_until
from tests.support.kafka_cluster import KafkaUnderTest
from tests.support.watched_pipelines import sink_pipeline
from watch.loop import Watch, watched_topics
from watch.publish import published_seen
from watch.reader import SinkReader

WAIT_S = 60.0

Sent = tuple[str | None, str | None, int, int, int]  # (header id, key, partition, offset, ts)


def wait_for(what: str, check: Callable[[], Any], timeout: float = WAIT_S) -> Any:
    return wait_until(check, timeout, what)


def produce(
    producer: Producer, topic: str, records: list[tuple[str | None, str, int, int]]
) -> list[Sent]:
    """(id header or None, key, partition, timestamp ms) each; what the broker acknowledged."""
    sent: list[Sent] = []

    def delivered(found: str | None) -> Callable[[Any, Any], None]:
        def report(error: Any, message: Any) -> None:
            assert error is None, error
            _, stamp = message.timestamp()
            key = message.key().decode()
            sent.append((found, key, message.partition(), message.offset(), stamp))

        return report

    for found, key, partition, stamp in records:
        headers: list[tuple[str, str | bytes | None]] = []
        if found is not None:
            headers.append(("dgm-id", found.encode()))
        producer.produce(
            topic,
            value=b"v",
            key=key.encode(),
            partition=partition,
            timestamp=stamp,
            headers=headers,
            on_delivery=delivered(found),
        )
    assert producer.flush(30) == 0
    return sent


def expected_extras(sent: list[Sent], by: int) -> set[tuple[str, int, int]]:
    """(id, partition, offset) of every copy but the first by (timestamp, partition, offset);
    `by` 0: the header id, 1: the key."""
    copies: dict[str, list[tuple[int, int, int]]] = {}
    for record in sent:
        found = record[by]
        if isinstance(found, str):
            copies.setdefault(found, []).append((record[4], record[2], record[3]))
    return {(i, p, o) for i, cs in copies.items() for _, p, o in sorted(cs)[1:]}


def told(state_dir: Path, pipeline: str) -> set[tuple[str, int, int]]:
    rows = published_seen(state_dir)
    return {
        (r["message_id"], r["partition"], r["offset"]) for r in rows if r["pipeline"] == pipeline
    }


class Running:
    def __init__(self, kafka: KafkaUnderTest, config: DgmConfig, state_dir: Path) -> None:
        routes = watched_topics(config)
        self.reader = SinkReader(kafka.client_config(), routes["default"], lookback=1000)
        self.watch = Watch(state_dir, {"default": self.reader}, routes, 1000, timedelta(hours=1))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.watch.run, args=(self.stop,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive()
        self.reader.close()


@pytest.fixture
def watching() -> Iterator[Callable[..., Running]]:
    started: list[Running] = []

    def start(*args: Any) -> Running:
        started.append(Running(*args))
        return started[-1]

    yield start
    for running in started:
        if running.thread.is_alive():
            running.close()


def test_the_watch_tells_every_extra_copy_of_the_sink_and_nothing_else(
    kafka: KafkaUnderTest, tmp_path: Path, watching: Callable[..., Running]
) -> None:
    sink = kafka.new_topic("watch-sink", partitions=3)
    by_header = sink_pipeline("by-header", sink)
    by_key = sink_pipeline("by-key", sink, MessageIdRule(kind="key"))
    config = DgmConfig(pipelines=(by_header, by_key))
    now = int(time.time() * 1000)
    producer = Producer(kafka.client_config())
    sent = produce(
        producer,
        sink,
        [
            ("a", "k1", 0, now),
            ("b", "k2", 0, now),
            ("b", "k3", 0, now + 1),
            ("c", "k4", 0, now),
            ("c", "k4", 1, now),
            ("c", "k5", 2, now + 5),
            # d's later copy is written first, in another partition: the extra copy is still
            # the later one by timestamp
            ("d", "k6", 1, now + 10),
            ("d", "k7", 2, now + 2),
            (None, "k1", 2, now),  # unidentified by header; a key copy of k1
        ],
    )
    aborted = Producer(kafka.client_config(**{"transactional.id": f"tx-{uuid.uuid4().hex}"}))
    aborted.init_transactions(30)
    aborted.begin_transaction()
    produce(aborted, sink, [("a", "k9", 1, now + 20), ("b", "k9", 2, now + 20)])
    aborted.abort_transaction(30)  # read_committed never sees them: no duplicates
    committed = Producer(kafka.client_config(**{"transactional.id": f"tx-{uuid.uuid4().hex}"}))
    committed.init_transactions(30)
    committed.begin_transaction()
    sent += produce(committed, sink, [("e", "k10", 1, now + 30), ("e", "k11", 2, now + 31)])
    committed.commit_transaction(30)
    header_extras, key_extras = expected_extras(sent, 0), expected_extras(sent, 1)
    assert len(header_extras) == 5 and len(key_extras) == 2  # the cases above, as meant

    running = watching(kafka, config, tmp_path)
    wait_for(
        "every extra copy",
        lambda: (
            told(tmp_path, "by-header") == header_extras and told(tmp_path, "by-key") == key_extras
        ),
    )
    # A new copy written while the watch runs is told within seconds.
    (late,) = produce(producer, sink, [("a", "k12", 2, int(time.time() * 1000))])
    header_extras.add(("a", late[2], late[3]))
    wait_for("the new copy", lambda: told(tmp_path, "by-header") == header_extras, 10.0)
    rows = [r for r in published_seen(tmp_path) if r["pipeline"] == "by-header"]
    first_of = {r["message_id"]: (r["first_partition"], r["first_offset"]) for r in rows}
    where = {(found, key): (partition, offset) for found, key, partition, offset, _ in sent}
    assert first_of["d"] == where["d", "k7"] and first_of["a"] == where["a", "k1"]
    running.close()

    # Restarted, it reads its lookback again: the same rows, none twice, none lost.
    before = sorted((r["pipeline"], r["partition"], r["offset"]) for r in published_seen(tmp_path))
    again = watching(kafka, config, tmp_path)
    wait_for("a publication", lambda: again.watch.records_read >= len(sent) + 1)
    again.watch.publish()
    after = sorted((r["pipeline"], r["partition"], r["offset"]) for r in published_seen(tmp_path))
    assert after == before
