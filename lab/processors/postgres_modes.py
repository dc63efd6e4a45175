"""postgres-exactly-once and postgres-at-least-once: results into a PostgreSQL table.

postgres-exactly-once stores each batch's rows and the next source offset per partition in
one PostgreSQL transaction, and a (re)started instance seeks to the stored offsets: the
store's own offsets say what it holds, so a SIGKILL anywhere neither loses nor repeats a
record. (The table has no unique id key: it is the transaction, not deduplication.) The
group's offsets are committed afterwards only so that monitoring sees the lag.

postgres-at-least-once inserts and commits the rows, then commits the consumer group's
offsets. A crash between the two makes the next owner read the batch again: its rows are
stored twice (reprocessing). Nothing is lost.

Phases: `produced` = the rows are committed in PostgreSQL; `committed` = the group's offsets.
"""

from __future__ import annotations

import threading

from confluent_kafka import Consumer, Message

from lab.processors.idempotent_sink import as_rows, sink_row
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
)
from lab.processors.postgres_sink import PostgresSink
from lab.processors.settings import ProcessorSettings


class PostgresStep:
    def __init__(
        self,
        settings: ProcessorSettings,
        store: PostgresSink,
        consumer: Consumer,
        offsets_in_store: bool,
    ) -> None:
        self.settings, self.store, self.consumer = settings, store, consumer
        self.offsets_in_store = offsets_in_store
        self.done: Offsets = {}  # what was last stored (and committed to the group)

    def batch(self, records: list[Message], number: int) -> None:
        offsets = positions(self.consumer)
        stored_offsets = as_rows(offsets) if self.offsets_in_store else []
        self.store.store([sink_row(m) for m in records], stored_offsets)
        announce("produced", number, self.settings)
        if commit_offsets(self.consumer, offsets):
            self.done.update(as_offsets(offsets))
        announce("committed", number, self.settings)

    def idle(self) -> None:
        # Positions move past control markers without a record: record them too, so the
        # store's offsets and the group catch up to the source's end.
        moved = advanced(positions(self.consumer), self.done)
        if not moved:
            return
        if self.offsets_in_store:
            self.store.store([], as_rows(moved))
        if commit_offsets(self.consumer, moved):
            self.done.update(as_offsets(moved))


def run(settings: ProcessorSettings, stop: threading.Event, offsets_in_store: bool) -> int:
    store = PostgresSink(settings.sink_dsn, settings.sink_table)
    hook = seek_to_stored(store, settings.source_topic) if offsets_in_store else None
    consumer = open_consumer(settings, "read_committed", on_assign=hook)
    step = PostgresStep(settings, store, consumer, offsets_in_store)
    return serve(consumer, step, settings, stop, consumer.close, store.close)


def run_exactly_once(settings: ProcessorSettings, stop: threading.Event) -> int:
    return run(settings, stop, offsets_in_store=True)


def run_at_least_once(settings: ProcessorSettings, stop: threading.Event) -> int:
    return run(settings, stop, offsets_in_store=False)
