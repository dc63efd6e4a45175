"""at-least-once: process and produce, flush, then commit.

A crash after the results are in the sink and before the commit makes the next owner read
that batch again: its results reach the sink twice (reprocessing). Nothing is lost.
"""

from __future__ import annotations

import threading

from confluent_kafka import Consumer, Message, Producer

from lab.processors.announce import say
from lab.processors.loop import (
    Offsets,
    advanced,
    announce,
    as_offsets,
    collect_failures,
    commit_offsets,
    flush_results,
    open_consumer,
    open_producer,
    positions,
    produce_results,
    run_loop,
)
from lab.processors.settings import ProcessorSettings


class AtLeastOnce:
    def __init__(self, settings: ProcessorSettings, consumer: Consumer) -> None:
        self.settings, self.consumer = settings, consumer
        self.failures: list[str] = []
        self.producer: Producer = open_producer(
            settings, on_delivery=collect_failures(self.failures)
        )
        self.committed: Offsets = {}

    def batch(self, records: list[Message], number: int) -> None:
        produce_results(self.producer, self.settings, records)
        # Raises if the sink refused anything: the process dies uncommitted and the batch is
        # read again by its restart, rather than committed and lost.
        flush_results(self.producer, self.failures)
        announce("produced", number, self.settings)
        offsets = positions(self.consumer)
        if commit_offsets(self.consumer, offsets):
            self.committed.update(as_offsets(offsets))
        announce("committed", number, self.settings)

    def idle(self) -> None:
        moved = advanced(positions(self.consumer), self.committed)
        if moved and commit_offsets(self.consumer, moved):
            self.committed.update(as_offsets(moved))

    def close(self) -> None:
        self.producer.flush(30)


def run(settings: ProcessorSettings, stop: threading.Event) -> int:
    consumer = open_consumer(settings, "read_committed")
    step = AtLeastOnce(settings, consumer)
    say("ready")
    try:
        run_loop(consumer, step, settings, stop)
    finally:
        step.close()
        consumer.close()
    return 0
