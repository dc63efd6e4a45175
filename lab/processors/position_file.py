"""A processor that commits no offsets anywhere Kafka can see: at-most-once by a local file.

It reads its source partitions by assign() (it never joins its group, never commits to it) from
the position kept in a JSON file, and writes the file BEFORE it produces a batch's results. A
crash between the two loses that batch: its restart starts past it. Nothing is read twice.

    python -m lab.processors.position_file --settings-json -     (ProcessorSettings on stdin,
                                                                  with sink_topic, position_path)

Speaks lab.processors.announce's protocol, plus one line before each batch's position is kept:

    claimed <batch> <p>:<first>-<end>,...     the source offsets [first, end) the batch holds
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition

from lab.processors.announce import format_partitions, say, settings_text
from lab.processors.loop import (
    announce,
    base_config,
    collect_failures,
    flush_results,
    open_producer,
    positions,
    produce_results,
    serve,
)
from lab.processors.settings import ProcessorSettings, SettingsError

Positions = dict[int, int]  # partition -> next offset to read


def read_positions(path: Path) -> Positions:
    if not path.exists():
        return {}
    return {int(p): int(o) for p, o in json.loads(path.read_text()).items()}


def write_positions(path: Path, kept: Positions) -> None:
    """Durably, whole or not at all: temp file, fsync, rename, fsync the folder."""
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("w") as file:
        json.dump({str(p): o for p, o in sorted(kept.items())}, file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def format_claim(batch: list[Message]) -> str:
    """`<p>:<first>-<end>` per partition of the batch, [first, end) in source offsets."""
    spans: dict[int, tuple[int, int]] = {}
    for message in batch:
        partition, offset = message.partition(), message.offset()
        assert partition is not None and offset is not None  # a fetched record
        first, end = spans.get(partition, (offset, offset + 1))
        spans[partition] = (min(first, offset), max(end, offset + 1))
    return ",".join(f"{p}:{first}-{end}" for p, (first, end) in sorted(spans.items()))


def parse_claim(line: str) -> tuple[int, dict[int, tuple[int, int]]] | None:
    """(batch, partition -> (first, end)) from a `claimed` line; None for any other line."""
    parts = line.split()
    if len(parts) != 3 or parts[0] != "claimed" or not parts[1].isdigit():
        return None
    spans = {}
    for span in parts[2].split(","):
        partition, _, offsets = span.partition(":")
        first, _, end = offsets.partition("-")
        spans[int(partition)] = (int(first), int(end))
    return int(parts[1]), spans


class PositionFileStep:
    def __init__(self, settings: ProcessorSettings, consumer: Consumer) -> None:
        self.settings, self.consumer = settings, consumer
        self.path = Path(settings.position_path)
        self.kept = read_positions(self.path)
        self.failures: list[str] = []
        self.producer: Producer = open_producer(
            settings, on_delivery=collect_failures(self.failures)
        )

    def batch(self, records: list[Message], number: int) -> None:
        say("claimed", number, format_claim(records))
        self._keep()
        announce("committed", number, self.settings)  # kept: the batch counts as done
        produce_results(self.producer, self.settings, records)
        flush_results(self.producer, self.failures)
        announce("produced", number, self.settings)

    def idle(self) -> None:
        # Positions move past control markers without a record: keep them, so the file
        # reaches the source's end.
        self._keep()

    def _keep(self) -> None:
        current = {tp.partition: tp.offset for tp in positions(self.consumer)}
        if current and current != self.kept:
            write_positions(self.path, {**self.kept, **current})
            self.kept.update(current)

    def close(self) -> None:
        self.producer.flush(30)


def open_assigned(settings: ProcessorSettings, kept: Positions) -> Consumer:
    """Every source partition by assign(), from the kept position or the beginning. The group
    id is named (it labels the client) but never joined and never committed to."""
    consumer = Consumer(
        {
            **base_config(settings),
            "group.id": settings.group_id,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
        }
    )
    topic = consumer.list_topics(settings.source_topic, timeout=30).topics[settings.source_topic]
    partitions = sorted(topic.partitions)
    consumer.assign(
        [
            TopicPartition(settings.source_topic, p, kept.get(p, OFFSET_BEGINNING))
            for p in partitions
        ]
    )
    say("assigned", format_partitions(partitions))
    return consumer


def run(settings: ProcessorSettings, stop: threading.Event) -> int:
    consumer = open_assigned(settings, read_positions(Path(settings.position_path)))
    step = PositionFileStep(settings, consumer)
    return serve(consumer, step, settings, stop, step.close, consumer.close)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.processors.position_file")
    parser.add_argument("--settings-json", required=True, help="ProcessorSettings; '-' = stdin")
    args = parser.parse_args(argv)
    text = settings_text(args.settings_json)
    try:
        settings = ProcessorSettings.from_json(text)
        if not settings.sink_topic or not settings.position_path:
            raise SettingsError("needs sink_topic and position_path")
    except SettingsError as error:
        print(f"position-file processor: error: {error}", file=sys.stderr)
        return 2
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format=f"%(asctime)s position-file pid {os.getpid()} %(levelname)s: %(message)s",
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return run(settings, stop)


if __name__ == "__main__":
    sys.exit(main())
