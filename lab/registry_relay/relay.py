"""The relay process (`python -m lab.registry_relay.relay`): consume v1 orders (Avro, JSON
Schema or Protobuf) through the registry, write v2, flush, then commit, every `--commit-every`
records. A SIGKILL between a flush and the commit after it makes its successor write those
records again: at-least-once, with duplicates that are byte-for-byte different from their
sources (a new writer schema id).

With `--paced` it says `flushed` after each batch's flush and waits for a line on stdin (or its
end) before committing, so a kill sent on reading that line lands between the two however late
it is read (the lab's processors are paced the same way: lab/processors/announce.py)."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext

from lab.registry_relay.schemas import FORMATS, deserializer, enriched, serializer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("--bootstrap", "--registry", "--source", "--sink", "--group"):
        parser.add_argument(name, required=True)
    parser.add_argument("--commit-every", type=int, default=50)
    parser.add_argument("--format", choices=FORMATS, default="avro")
    parser.add_argument("--paced", action="store_true", help="wait for a go after each flush")
    args = parser.parse_args(argv)
    registry = SchemaRegistryClient({"url": args.registry})
    reader = deserializer(args.format, registry, 1)
    writer = serializer(args.format, registry, 2)
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            # Static membership: a restarted relay takes the killed one's place at once.
            "group.instance.id": f"{args.group}-relay",
            "session.timeout.ms": 10000,
        }
    )
    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 20})
    # SIGTERM (the lab's stop) ends it as Ctrl-C does: flush, commit, close.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    consumer.subscribe([args.source])
    pending = 0
    print("started", flush=True)
    try:
        while True:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            record: Any = reader(
                message.value(), SerializationContext(args.source, MessageField.VALUE)
            )
            value = writer(enriched(record), SerializationContext(args.sink, MessageField.VALUE))
            producer.produce(args.sink, value=value, key=message.key())
            pending += 1
            if pending >= args.commit_every:
                pending = _flush_and_commit(producer, consumer, args.paced)
    except KeyboardInterrupt:
        pass
    _flush_and_commit(producer, consumer, paced=False)
    consumer.close()
    return 0


def _flush_and_commit(producer: Producer, consumer: Consumer, paced: bool) -> int:
    if producer.flush(30) != 0:
        raise SystemExit("records not acknowledged within 30 s: not committing them")
    if paced:
        print("flushed", flush=True)
        sys.stdin.readline()  # the go (or stdin's end)
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as error:
        if error.args[0].code() != KafkaError._NO_OFFSET:  # nothing read since the last one
            raise
    print("committed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
