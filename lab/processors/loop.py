"""What every processor mode shares: its clients, the transform, lineage stamping, the loop."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from dgm.contracts.headers import ID, SRC, format_src, header_map
from lab.processors.announce import Phase, format_partitions, say, wait_for_go
from lab.processors.settings import ProcessorSettings

log = logging.getLogger("lab.processor")

# How long one consume() waits for records before the loop counts as idle.
POLL_SECONDS = 0.5

Offsets = dict[tuple[str, int], int]
AssignHook = Callable[[Consumer, list[TopicPartition]], None]


class SinkWriteFailed(RuntimeError):
    """The sink did not take every result of a batch: its offsets must not be committed."""


def transform(value: bytes | None) -> bytes | None:
    """The lab's business logic: upper-case the value."""
    return None if value is None else value.upper()


def sink_headers(message: Message) -> list[tuple[str, str | bytes | None]]:
    """The id carried over from the source, plus the lineage: where this result came from."""
    source = header_map(message.headers())
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    assert topic is not None and partition is not None and offset is not None  # a fetched record
    stamped: list[tuple[str, str | bytes | None]] = [(ID, source[ID])] if ID in source else []
    return [*stamped, (SRC, format_src(topic, partition, offset).encode())]


def announce(phase: Phase, batch: int, settings: ProcessorSettings) -> None:
    """Say the phase, then 'process' for step_delay: the window where an aimed kill lands (held
    open until the supervisor's go when paced)."""
    say("phase", phase, batch)
    if settings.paced:
        wait_for_go()
    time.sleep(settings.step_delay)


def base_config(settings: ProcessorSettings) -> dict[str, Any]:
    return {"bootstrap.servers": settings.bootstrap_servers, **settings.client}


def open_consumer(
    settings: ProcessorSettings, isolation: str, on_assign: AssignHook | None = None
) -> Consumer:
    config = {
        **base_config(settings),
        "group.id": settings.group_id,
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": settings.session_timeout_ms,
    }
    if settings.static_member:
        config["group.instance.id"] = f"{settings.group_id}-{settings.instance}"
    consumer = Consumer(config)

    def assigned(c: Consumer, partitions: list[TopicPartition]) -> None:
        say("assigned", format_partitions([tp.partition for tp in partitions]))
        if on_assign is not None:
            on_assign(c, partitions)

    def revoked(c: Consumer, partitions: list[TopicPartition]) -> None:
        say("revoked", format_partitions([tp.partition for tp in partitions]))

    consumer.subscribe([settings.source_topic], on_assign=assigned, on_revoke=revoked)
    return consumer


def open_producer(settings: ProcessorSettings, **extra: Any) -> Producer:
    # Idempotent: a duplicate in the sink must come from the processor's own logic (reprocessing),
    # never from a retry of the sink producer.
    return Producer({**base_config(settings), "acks": "all", "enable.idempotence": True, **extra})


def produce_results(producer: Producer, settings: ProcessorSettings, batch: list[Message]) -> None:
    for message in batch:
        while True:
            try:
                producer.produce(
                    settings.sink_topic,
                    key=message.key(),
                    value=transform(message.value()),
                    headers=sink_headers(message),
                )
                break
            except BufferError:  # local queue full: let deliveries drain, then retry
                producer.poll(0.1)
        producer.poll(0)


def flush_results(producer: Producer, failures: list[str], timeout: float = 120.0) -> None:
    """Wait until the sink acknowledged everything; SinkWriteFailed if anything failed."""
    remaining = producer.flush(timeout)
    if remaining or failures:
        detail = failures[0] if failures else f"{remaining} still unacknowledged"
        failures.clear()
        raise SinkWriteFailed(f"the sink did not take the batch: {detail}")


def collect_failures(failures: list[str]) -> Callable[[KafkaError | None, Message], None]:
    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(str(error))

    return on_delivery


def positions(consumer: Consumer) -> list[TopicPartition]:
    """Next offset to read per assigned partition, past records and control markers alike."""
    assignment = consumer.assignment()
    if not assignment:
        return []
    return [tp for tp in consumer.position(assignment) if tp.offset >= 0]


def as_offsets(partitions: list[TopicPartition]) -> Offsets:
    return {(tp.topic, tp.partition): tp.offset for tp in partitions}


def advanced(current: list[TopicPartition], done: Offsets) -> list[TopicPartition]:
    """The partitions whose position moved past what was last committed (or never was)."""
    return [tp for tp in current if done.get((tp.topic, tp.partition)) != tp.offset]


def commit_offsets(consumer: Consumer, offsets: list[TopicPartition]) -> bool:
    """Synchronous commit; False (logged) if the group took the partitions away meanwhile."""
    if not offsets:
        return True
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
        return True
    except KafkaException as error:
        log.warning("offset commit failed (%s); the partitions' new owner redelivers", error)
        return False


def is_fatal(error: KafkaError) -> bool:
    """A consumer error it cannot recover from.

    librdkafka hands a fatal consumer error (a static member fenced after its session timed
    out while a broker was away) to consume() as code _FATAL without the fatal flag set; the
    consumer never delivers again after it, so the loop must not treat it as transient.
    """
    return error.fatal() or error.code() == KafkaError._FATAL


class Step(Protocol):
    def batch(self, records: list[Message], number: int) -> None: ...

    def idle(self) -> None: ...


class OffsetStore(Protocol):
    """An external store that keeps, with the rows, the next source offset per partition."""

    def next_offsets(self, topic: str) -> dict[int, int]: ...


def seek_to_stored(store: OffsetStore, topic: str) -> AssignHook:
    """An on-assignment hook: start where the store says, not where the group says."""

    def seek(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        stored = store.next_offsets(topic)
        for tp in partitions:
            if tp.partition in stored:
                tp.offset = stored[tp.partition]
        consumer.assign(partitions)

    return seek


def serve(
    consumer: Consumer,
    step: Step,
    settings: ProcessorSettings,
    stop: threading.Event,
    *closing: Callable[[], object],
) -> int:
    """Say `ready`, run the loop until `stop`, then close what the mode opened, in order."""
    say("ready")
    try:
        run_loop(consumer, step, settings, stop)
    finally:
        for close in closing:
            close()
    return 0


def run_loop(
    consumer: Consumer, step: Step, settings: ProcessorSettings, stop: threading.Event
) -> None:
    """Consume batches until `stop`; each non-empty batch is one numbered step."""
    number = 0
    while not stop.is_set():
        records = []
        for message in consumer.consume(settings.batch_size, POLL_SECONDS):
            error = message.error()
            if error is None:
                records.append(message)
            elif is_fatal(error):
                raise KafkaException(error)  # the process dies; its supervisor restarts it
            else:  # transient (a broker away, a rebalance): librdkafka retries with backoff
                log.warning("consumer: %s", error)
        if records:
            number += 1
            step.batch(records, number)
        else:
            step.idle()
