"""A relay whose consumer is in a share group (KIP-932, Kafka's queues): it copies each
record it acquires to the sink and acknowledges it, in one of two orders.

- `produce-first`: produce the batch, wait for the sink, then acknowledge it. A SIGKILL
  between the two leaves the batch acquired and unacknowledged: the broker releases it when
  its acquisition lock expires, and a later poll gets it again (its delivery count higher).
  Copied twice: at-least-once by redelivery.
- `acknowledge-first`: acknowledge the batch, then produce it. A SIGKILL between the two
  loses it: the share group counts it as done and nothing redelivers it. At-most-once.

A share group commits no offsets: which records it has finished is the share partitions'
state, which only the broker holds. The relay reads nothing it did not acquire and writes
dgm-src on every copy (lab.processors.loop), like the lab's other processors.

    python -m lab.processors.share_relay --order produce-first --settings-json -

Speaks lab.processors.announce's protocol (`committed` is the acknowledgement: sent, and
answered by the broker), plus, before each batch's first step:

    claimed <batch> <p>:<first>-<end>,...     source offsets the batch holds, as
                                              lab.processors.position_file says them; a
                                              batch's offsets need not be contiguous (records
                                              come back when released), so one line per run
    redelivered <batch> <n>                   how many of them the broker had delivered before
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Literal, get_args

from confluent_kafka import Message, Producer, ShareConsumer

from lab.processors.announce import say, settings_text
from lab.processors.loop import (
    announce,
    base_config,
    collect_failures,
    flush_results,
    open_producer,
    produce_results,
)
from lab.processors.settings import ProcessorSettings, SettingsError

Order = Literal["produce-first", "acknowledge-first"]
ORDERS: tuple[str, ...] = get_args(Order)
POLL_TIMEOUT_S = 0.5

log = logging.getLogger("lab.share_relay")


def claims(positions: list[tuple[int, int]]) -> list[str]:
    """A batch's (partition, offset)s as `claimed` spans: the n-th contiguous run of each
    partition on the n-th line."""
    offsets: dict[int, list[int]] = {}
    for partition, offset in positions:
        offsets.setdefault(partition, []).append(offset)
    runs = {p: _runs(sorted(found)) for p, found in offsets.items()}
    lines = []
    for n in range(max((len(r) for r in runs.values()), default=0)):
        spans = [(p, r[n]) for p, r in sorted(runs.items()) if n < len(r)]
        lines.append(",".join(f"{p}:{first}-{end}" for p, (first, end) in spans))
    return lines


def _position(message: Message) -> tuple[int, int]:
    partition, offset = message.partition(), message.offset()
    assert partition is not None and offset is not None  # an acquired record
    return partition, offset


def _runs(offsets: list[int]) -> list[tuple[int, int]]:
    """[first, end) of each run of consecutive offsets (sorted, distinct)."""
    found: list[tuple[int, int]] = []
    for offset in offsets:
        if found and found[-1][1] == offset:
            found[-1] = (found[-1][0], offset + 1)
        else:
            found.append((offset, offset + 1))
    return found


def open_share_consumer(settings: ProcessorSettings) -> ShareConsumer:
    consumer = ShareConsumer(
        {
            **base_config(settings),
            "group.id": settings.group_id,
            "share.acknowledgement.mode": "explicit",
            # Batches of the lab's size; records fetched beyond them are acquired too (and
            # redelivered after a kill without having been copied).
            "max.poll.records": settings.batch_size,
        }
    )
    consumer.subscribe([settings.source_topic])
    return consumer


class ShareRelay:
    def __init__(self, settings: ProcessorSettings, order: Order) -> None:
        self.settings, self.order = settings, order
        self.consumer = open_share_consumer(settings)
        self.failures: list[str] = []
        self.producer: Producer = open_producer(
            settings, on_delivery=collect_failures(self.failures)
        )
        self.batches = 0

    def step(self) -> None:
        """One poll and, if it acquired records, their copy and acknowledgement."""
        polled = list(self.consumer.poll(POLL_TIMEOUT_S))
        for message in polled:
            if message.error() is not None:
                log.warning("poll: %s", message.error())
        records = [m for m in polled if m.error() is None]
        if not records:
            return
        self.batches += 1
        number = self.batches
        for claim in claims([_position(m) for m in records]):
            say("claimed", number, claim)
        say("redelivered", number, sum(1 for m in records if (m.delivery_count() or 1) > 1))
        if self.order == "acknowledge-first":
            self._acknowledge(records, number)
            self._produce(records, number)
        else:
            self._produce(records, number)
            self._acknowledge(records, number)

    def _produce(self, records: list[Message], number: int) -> None:
        produce_results(self.producer, self.settings, records)
        flush_results(self.producer, self.failures)
        announce("produced", number, self.settings)

    def _acknowledge(self, records: list[Message], number: int) -> None:
        for message in records:
            self.consumer.acknowledge(message)
        refused = {tp: e for tp, e in self.consumer.commit_sync().items() if e is not None}
        if refused:
            # Not acknowledged (the lock expired meanwhile): the broker delivers them again.
            log.warning("acknowledgements refused for batch %d: %s", number, refused)
            return
        announce("committed", number, self.settings)

    def close(self) -> None:
        self.producer.flush(30)
        self.consumer.close()


def run(settings: ProcessorSettings, order: Order, stop: threading.Event) -> int:
    relay = ShareRelay(settings, order)
    say("ready", os.getpid())
    try:
        while not stop.is_set():
            relay.step()
    finally:
        relay.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.processors.share_relay")
    parser.add_argument("--order", choices=ORDERS, required=True)
    parser.add_argument("--settings-json", required=True, help="ProcessorSettings; '-' = stdin")
    args = parser.parse_args(argv)
    text = settings_text(args.settings_json)
    try:
        settings = ProcessorSettings.from_json(text)
        if not settings.sink_topic:
            raise SettingsError("needs sink_topic")
    except SettingsError as error:
        print(f"share relay: error: {error}", file=sys.stderr)
        return 2
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format=f"%(asctime)s share-relay pid {os.getpid()} %(levelname)s: %(message)s",
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    order: Order = "acknowledge-first" if args.order == "acknowledge-first" else "produce-first"
    return run(settings, order, stop)


if __name__ == "__main__":
    sys.exit(main())
