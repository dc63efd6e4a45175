"""at-most-once and at-least-once: one loop that commits before, or after, the results.

at-most-once commits the consumed offsets, then processes and produces. A crash after the
commit and before the results are in the sink loses that batch: the group already claims it,
so nobody reads it again. Nothing is ever processed twice.

at-least-once processes and produces, flushes, then commits. A crash after the results are in
the sink and before the commit makes the next owner read that batch again: its results reach
the sink twice (reprocessing). Nothing is lost.
"""

from __future__ import annotations

import threading

from confluent_kafka import Consumer, Message, Producer

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
    serve,
)
from lab.processors.settings import ProcessorSettings


class CommitOrdered:
    def __init__(self, settings: ProcessorSettings, consumer: Consumer, commit_first: bool) -> None:
        self.settings, self.consumer, self.commit_first = settings, consumer, commit_first
        self.failures: list[str] = []
        self.producer: Producer = open_producer(
            settings, on_delivery=collect_failures(self.failures)
        )
        self.committed: Offsets = {}

    def batch(self, records: list[Message], number: int) -> None:
        if self.commit_first and not self._commit(number):
            return  # not ours any more: the new owner processes it (at most once, not twice)
        produce_results(self.producer, self.settings, records)
        # Raises if the sink refused anything: the process dies before an at-least-once
        # commit, and the batch is read again by its restart rather than committed and lost.
        flush_results(self.producer, self.failures)
        announce("produced", number, self.settings)
        if not self.commit_first:
            self._commit(number)

    def _commit(self, number: int) -> bool:
        offsets = positions(self.consumer)
        committed = commit_offsets(self.consumer, offsets)
        if committed:
            self.committed.update(as_offsets(offsets))
        if committed or not self.commit_first:
            announce("committed", number, self.settings)
        return committed

    def idle(self) -> None:
        # Positions move past control markers without a record: commit them so the group
        # catches up to the source's end.
        moved = advanced(positions(self.consumer), self.committed)
        if moved and commit_offsets(self.consumer, moved):
            self.committed.update(as_offsets(moved))

    def close(self) -> None:
        self.producer.flush(30)


def run(settings: ProcessorSettings, stop: threading.Event, commit_first: bool) -> int:
    consumer = open_consumer(settings, "read_committed")
    step = CommitOrdered(settings, consumer, commit_first)
    return serve(consumer, step, settings, stop, step.close, consumer.close)


def run_at_most_once(settings: ProcessorSettings, stop: threading.Event) -> int:
    return run(settings, stop, commit_first=True)


def run_at_least_once(settings: ProcessorSettings, stop: threading.Event) -> int:
    return run(settings, stop, commit_first=False)
