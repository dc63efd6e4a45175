"""exactly-once: transactional consume-transform-produce.

Results and the consumed offsets go into one transaction: both land, or neither does. Input is
read read_committed. A crash mid-transaction leaves it open until the restarted instance's
init_transactions (same transactional.id) fences the zombie and aborts it; the batch is then
read again from the committed offsets, and read_committed readers of the sink never see the
aborted copy.
"""

from __future__ import annotations

import logging
import threading

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from lab.processors.announce import say
from lab.processors.loop import (
    Offsets,
    advanced,
    announce,
    as_offsets,
    open_consumer,
    open_producer,
    positions,
    produce_results,
    run_loop,
)
from lab.processors.settings import ProcessorSettings
from lab.processors.watchdog import GRACE_S, deadline

log = logging.getLogger("lab.processor")

# Exit status of an instance fenced by a newer one with its transactional.id: a zombie stops.
EXIT_FENCED = 3
TRANSACTION_TIMEOUT_MS = 20_000
CALL_TIMEOUT_S = 30.0  # each transactional call's own timeout
_FENCED_CODES = {KafkaError._FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


class Fenced(Exception):
    pass


def transactional_id(settings: ProcessorSettings) -> str:
    return f"{settings.group_id}-{settings.instance}"


class Transactional:
    def __init__(self, settings: ProcessorSettings, consumer: Consumer, producer: Producer) -> None:
        self.settings, self.consumer, self.producer = settings, consumer, producer
        self.committed: Offsets = {}
        self.open = False

    def batch(self, records: list[Message], number: int) -> None:
        try:
            self.producer.begin_transaction()
            self.open = True
            produce_results(self.producer, self.settings, records)
            # In the log, uncommitted, before the phase is announced: a kill now leaves
            # records that only the transaction's abort keeps from read_committed readers.
            self.producer.flush(60)
            announce("produced", number, self.settings)
            self._commit(positions(self.consumer))
        except KafkaException as error:
            self._recover(error)
            return
        announce("committed", number, self.settings)

    def idle(self) -> None:
        # Positions move past control markers and aborted records without a record to
        # process: commit them (in an offsets-only transaction) so the group reaches the end.
        moved = advanced(positions(self.consumer), self.committed)
        if not moved:
            return
        try:
            self.producer.begin_transaction()
            self.open = True
            self._commit(moved)
        except KafkaException as error:
            self._recover(error)

    def _commit(self, offsets: list[TopicPartition]) -> None:
        if offsets:
            metadata = self.consumer.consumer_group_metadata()
            with deadline(CALL_TIMEOUT_S + GRACE_S, "send_offsets_to_transaction"):
                self.producer.send_offsets_to_transaction(offsets, metadata, CALL_TIMEOUT_S)
        while True:
            try:
                with deadline(CALL_TIMEOUT_S + GRACE_S, "commit_transaction"):
                    self.producer.commit_transaction(CALL_TIMEOUT_S)
                break
            except KafkaException as error:
                if not error.args[0].retriable():
                    raise
                log.warning("commit_transaction: %s; retrying", error)
        self.open = False
        self.committed.update(as_offsets(offsets))

    def _recover(self, error: KafkaException) -> None:
        kafka_error: KafkaError = error.args[0]
        if kafka_error.code() in _FENCED_CODES or kafka_error.fatal():
            raise Fenced(str(kafka_error)) from error
        # Abortable (e.g. the group rebalanced under us): drop the transaction's results and
        # read its input again from the committed offsets.
        log.warning("transaction aborted: %s", kafka_error)
        with deadline(CALL_TIMEOUT_S + GRACE_S, "abort_transaction"):
            self.producer.abort_transaction(CALL_TIMEOUT_S)
        self.open = False
        self.committed.clear()
        rewind(self.consumer)

    def close(self) -> None:
        if self.open:
            try:
                self.producer.abort_transaction(30)
            except KafkaException as error:
                log.warning("abort on close: %s", error)


def rewind(consumer: Consumer) -> None:
    """Seek every assigned partition back to its committed offset."""
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp in consumer.committed(assignment, timeout=60):
        offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
        try:
            consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
        except KafkaException as error:  # not fetching yet: it starts from committed anyway
            log.warning("seek %s[%d]: %s", tp.topic, tp.partition, error)


def run(
    settings: ProcessorSettings, stop: threading.Event, isolation: str = "read_committed"
) -> int:
    producer = open_producer(
        settings,
        **{
            "transactional.id": transactional_id(settings),
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        },
    )
    # Fences any earlier instance with this transactional.id and aborts what it left open,
    # before this one reads a single offset.
    with deadline(120 + GRACE_S, "init_transactions"):
        producer.init_transactions(120)
    consumer = open_consumer(settings, isolation)
    step = Transactional(settings, consumer, producer)
    say("ready")
    try:
        run_loop(consumer, step, settings, stop)
    except Fenced as error:
        log.error("fenced by a newer instance, stopping: %s", error)
        say("fenced")
        return EXIT_FENCED
    finally:
        step.close()
        consumer.close()
    return 0
