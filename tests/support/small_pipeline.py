"""One small at-least-once pipeline on the session's broker, collected and ready for
`dgm analyze --once`: what the tests that run the analysis command itself start from."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from dgm.contracts.headers import ID, PRODUCER, SEQ, SRC
from dgm.util.waiting import wait_until
from tests.support.published_lab import collecting

PARTITIONS = 2
DUPLICATED = 10  # of the 200 source records, these many reach the sink twice


def fill(kafka: Any, source: str, sink: str, group: str) -> None:
    """A source of 200 stamped records; a sink holding all of them, 10 twice (reprocessing);
    the group committed up to the end of the source."""
    producer = Producer(kafka.client_config(**{"enable.idempotence": True}))
    session = uuid.uuid4().hex
    for n in range(200):
        partition = n % PARTITIONS
        headers: dict[str, str | bytes | None] = {
            ID: f"m-{n}",
            PRODUCER: session,
            SEQ: str(n // PARTITIONS),
        }
        producer.produce(source, b"v", f"k{n}", partition=partition, headers=headers)
    producer.flush(30)
    for n in range(200):
        partition = n % PARTITIONS
        lineage = f"{source}/{partition}/{n // PARTITIONS}"
        for _ in range(2 if n < DUPLICATED else 1):
            producer.produce(sink, b"v", partition=partition, headers={ID: f"m-{n}", SRC: lineage})
    producer.flush(30)
    consumer = Consumer(kafka.client_config(**{"group.id": group}))
    try:
        offsets = [TopicPartition(source, p, 100) for p in range(PARTITIONS)]
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


@dataclass(frozen=True)
class SmallPipeline:
    """The pipeline "crashy": its topics and group."""

    source: str
    sink: str
    group: str

    def write_config(self, directory: Path, bootstrap: str) -> Path:
        """directory/dgm.toml monitoring it, its state in directory/state."""
        path = directory / "dgm.toml"
        path.write_text(
            f'state_dir = "{directory / "state"}"\n'
            f'[cluster]\nbootstrap_servers = "{bootstrap}"\n'
            "[analysis]\ngrace_s = 0\nmin_records = 10\n"
            f"[collectors]\ninclude_topics = ['^{self.source}$', '^{self.sink}$']\n"
            f'[[pipelines]]\nname = "crashy"\nsource_topics = ["{self.source}"]\n'
            f'sink_topics = ["{self.sink}"]\nconsumer_group = "{self.group}"\n'
            'declared_semantic = "at-least-once"\n'
        )
        return path


def collected(kafka: Any, directory: Path) -> tuple[SmallPipeline, Path]:
    """New topics filled as `fill` says and two collector samples of them in directory/state:
    the pipeline and its config file."""
    from dgm.config.loader import load_config

    pipeline = SmallPipeline(
        kafka.new_topic("crash-src", PARTITIONS),
        kafka.new_topic("crash-sink", PARTITIONS),
        f"crash-{uuid.uuid4().hex[:8]}",
    )
    fill(kafka, pipeline.source, pipeline.sink, pipeline.group)
    directory.mkdir(parents=True, exist_ok=True)
    config = pipeline.write_config(directory, kafka.bootstrap_servers)
    samples = directory / "state" / "samples" / "offsets"
    with collecting(kafka.bootstrap_servers, load_config(config), interval_s=0.5):
        wait_until(lambda: len(list(samples.glob("*.parquet"))) >= 2, 60, "samples")
    return pipeline, config
