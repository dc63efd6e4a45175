"""idempotent-sink: at-least-once consumption into an external store keyed by message id.

Rows and the next source offsets are written in one SQLite transaction, and a (re)started
instance seeks to the stored offsets: exactly-once into an external system. The id key makes
the store idempotent as well, so a duplicate already in the source is stored once. Offsets are
also committed to the consumer group afterwards, only so that monitoring sees the lag.

Phases: `produced` = the batch is stored; `committed` = the group offsets are committed.
"""

from __future__ import annotations

import threading
from pathlib import Path

from confluent_kafka import Consumer, Message, TopicPartition

from dgm.contracts.headers import ID, format_src, header_map
from lab.processors.loop import (
    Offsets,
    advanced,
    announce,
    as_offsets,
    commit_offsets,
    open_consumer,
    positions,
    seek_to_stored,
    serve,
    transform,
)
from lab.processors.settings import ProcessorSettings
from lab.processors.sqlite_sink import SinkRow, SinkStore


def sink_row(message: Message) -> SinkRow:
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    assert topic is not None and partition is not None and offset is not None  # a fetched record
    found = header_map(message.headers()).get(ID)
    # No id header: the record's own position is the only identity it has.
    message_id = found.decode() if found is not None else format_src(topic, partition, offset)
    return SinkRow(message_id, transform(message.value()), topic, partition, offset)


def as_rows(partitions: list[TopicPartition]) -> list[tuple[str, int, int]]:
    return [(tp.topic, tp.partition, tp.offset) for tp in partitions]


class IdempotentSink:
    def __init__(self, settings: ProcessorSettings, store: SinkStore, consumer: Consumer) -> None:
        self.settings, self.store, self.consumer = settings, store, consumer
        self.stored: Offsets = {}

    def batch(self, records: list[Message], number: int) -> None:
        offsets = positions(self.consumer)
        self.store.store([sink_row(m) for m in records], as_rows(offsets))
        self.stored.update(as_offsets(offsets))
        announce("produced", number, self.settings)
        commit_offsets(self.consumer, offsets)
        announce("committed", number, self.settings)

    def idle(self) -> None:
        moved = advanced(positions(self.consumer), self.stored)
        if moved:
            self.store.store([], as_rows(moved))
            self.stored.update(as_offsets(moved))
            commit_offsets(self.consumer, moved)


def run(settings: ProcessorSettings, stop: threading.Event) -> int:
    store = SinkStore(Path(settings.sink_path), settings.sink_table)
    hook = seek_to_stored(store, settings.source_topic)
    consumer = open_consumer(settings, "read_committed", on_assign=hook)
    step = IdempotentSink(settings, store, consumer)
    return serve(consumer, step, settings, stop, consumer.close, store.close)
