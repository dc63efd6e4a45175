"""at-most-once: commit the consumed offsets, then process and produce.

A crash after the commit and before the results are in the sink loses that batch: the group
already claims it, so nobody reads it again. Nothing is ever processed twice.
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


class AtMostOnce:
    def __init__(self, settings: ProcessorSettings, consumer: Consumer) -> None:
        self.settings, self.consumer = settings, consumer
        self.failures: list[str] = []
        self.producer: Producer = open_producer(
            settings, on_delivery=collect_failures(self.failures)
        )
        self.committed: Offsets = {}

    def batch(self, records: list[Message], number: int) -> None:
        offsets = positions(self.consumer)
        if not commit_offsets(self.consumer, offsets):
            return  # not ours any more: the new owner processes it (at most once, not twice)
        self.committed.update(as_offsets(offsets))
        announce("committed", number, self.settings)
        produce_results(self.producer, self.settings, records)
        flush_results(self.producer, self.failures)
        announce("produced", number, self.settings)

    def idle(self) -> None:
        # Positions move past control markers without a record: commit them so the group
        # catches up to the source's end.
        moved = advanced(positions(self.consumer), self.committed)
        if moved and commit_offsets(self.consumer, moved):
            self.committed.update(as_offsets(moved))

    def close(self) -> None:
        self.producer.flush(30)


def run(settings: ProcessorSettings, stop: threading.Event) -> int:
    consumer = open_consumer(settings, "read_committed")
    step = AtMostOnce(settings, consumer)
    say("ready")
    try:
        run_loop(consumer, step, settings, stop)
    finally:
        step.close()
        consumer.close()
    return 0
