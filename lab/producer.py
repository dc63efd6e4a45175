"""The stamped source producer: every message carries dgm-id, dgm-producer and dgm-seq (or, with
stamp_headers off, no header at all: the id is then only in the JSON value), and the ledger
records what was sent before it is sent and what the broker acknowledged after.

Runnable as its own process (so a supervisor can SIGKILL it):
    python -m lab.producer --settings-json '<ProducerSettings as JSON>'   ('-' reads stdin)
It prints the ProducerResult as one JSON line at the end.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from dgm.contracts import headers
from dgm.util.errors import UserFacingError
from dgm.util.waiting import TimedOut, wait_until
from lab.ledger import Event, LedgerEntry, LedgerWriter

CHUNK = 500  # messages whose "sent" entries are made durable together, before they are produced


class ProducerSettingsError(UserFacingError):
    pass


@dataclass(frozen=True)
class ProducerSettings:
    bootstrap_servers: str
    topic: str
    messages: int
    ledger_path: Path
    rate: float | None = None  # messages/s; None = as fast as possible
    acks: str = "all"
    retries: int | None = None  # None = librdkafka's default
    enable_idempotence: bool = True
    # max.in.flight.requests.per.connection; None = librdkafka's default (5 with idempotence,
    # a million without). Without idempotence, more than 1 lets a retried request land after
    # a later one: what makes a producer session's records out of order (docs/design.md).
    max_in_flight: int | None = None
    transactional_id: str | None = None
    transaction_size: int = 10  # messages per transaction when transactional
    abort_every: int = 0  # abort every k-th transaction (0 = never)
    key_spread: int = 100  # keys key-0..key-(n-1), spread over partitions
    session: str = ""  # the dgm-producer value; "" = a fresh uuid4 hex
    # False: no headers at all, as most real producers send; ids only in the value's "id".
    stamp_headers: bool = True
    # Extra librdkafka settings (security, request.timeout.ms, ...); may hold secrets: no repr.
    client: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class ProducerResult:
    sent: int
    acked: int
    failed: int
    aborted: int
    session: str


def validate(settings: ProducerSettings) -> None:
    problems = [
        message
        for broken, message in (
            (settings.messages < 0, f"messages must be >= 0, got {settings.messages}"),
            (settings.rate is not None and settings.rate <= 0, "rate must be > 0 (or unset)"),
            (settings.transaction_size < 1, "transaction_size must be >= 1"),
            (settings.abort_every < 0, "abort_every must be >= 0 (0 = never abort)"),
            (settings.key_spread < 1, "key_spread must be >= 1"),
            (settings.retries is not None and settings.retries < 0, "retries must be >= 0"),
            (
                settings.max_in_flight is not None and settings.max_in_flight < 1,
                "max_in_flight must be >= 1 (or unset)",
            ),
            (not settings.topic, "topic must not be empty"),
            (
                settings.transactional_id is not None and not settings.enable_idempotence,
                "a transactional producer is idempotent: drop enable_idempotence=false",
            ),
            (
                settings.abort_every > 0 and settings.transactional_id is None,
                "abort_every needs a transactional_id",
            ),
        )
        if broken
    ]
    if problems:
        raise ProducerSettingsError("bad producer settings: " + "; ".join(problems))


def librdkafka_config(settings: ProducerSettings) -> dict[str, Any]:
    config: dict[str, Any] = {
        **settings.client,
        "bootstrap.servers": settings.bootstrap_servers,
        "acks": settings.acks,
        "enable.idempotence": settings.enable_idempotence,
    }
    if settings.retries is not None:
        config["retries"] = settings.retries
    if settings.max_in_flight is not None:
        config["max.in.flight.requests.per.connection"] = settings.max_in_flight
    if settings.transactional_id is not None:
        config["transactional.id"] = settings.transactional_id
    return config


def message_key(n: int, key_spread: int) -> str:
    return f"key-{n % key_spread}"


def partition_for(key: str, partitions: int) -> int:
    # librdkafka's "consistent" partitioner (CRC32 of the key): chosen here, not by the client,
    # because dgm-seq counts per partition and must be known when the message is stamped.
    return zlib.crc32(key.encode()) % partitions


def should_abort(transaction: int, abort_every: int) -> bool:
    """Transactions count from 1; every abort_every-th one is aborted."""
    return abort_every > 0 and transaction % abort_every == 0


@dataclass
class _Stamp:
    n: int
    message_id: str
    key: str
    partition: int
    seq: int


class _Run:
    """One producer session: stamps, produces and writes the ledger (one thread only)."""

    def __init__(self, settings: ProducerSettings, stop: threading.Event) -> None:
        self.settings, self.stop = settings, stop
        self.session = settings.session or uuid.uuid4().hex
        try:
            self.producer = Producer(librdkafka_config(settings))
        except KafkaException as error:
            raise ProducerSettingsError(f"the Kafka client refused the settings: {error}") from None
        self.partitions = _partition_count(self.producer, settings.topic)
        self.ledger = LedgerWriter(settings.ledger_path)
        self.next_seq = [0] * self.partitions
        self.counts = {"sent": 0, "acked": 0, "failed": 0, "aborted": 0}
        self.started = time.monotonic()
        # Delivery reports of the open transaction: acked or aborted only once it ends.
        self.pending: dict[str, tuple[_Stamp, int | None, str | None]] = {}

    def result(self) -> ProducerResult:
        return ProducerResult(session=self.session, **self.counts)

    def record(self, event: Event, s: _Stamp, offset: int | None, error: str | None) -> None:
        self.counts[event] += 1
        self.ledger.append(
            LedgerEntry(
                event, s.message_id, self.session, s.partition, s.seq, offset, time.time(), error
            )
        )

    def stamp(self, count: int) -> list[_Stamp]:
        """The next `count` messages, each "sent" in the ledger and durable before produced."""
        stamps = []
        for n in range(self.counts["sent"], self.counts["sent"] + count):
            key = message_key(n, self.settings.key_spread)
            partition = partition_for(key, self.partitions)
            s = _Stamp(n, f"{self.session}-{n}", key, partition, self.next_seq[partition])
            self.next_seq[partition] += 1
            stamps.append(s)
            self.record("sent", s, None, None)
        self.ledger.flush()
        return stamps

    def produce(self, s: _Stamp, on_delivery: Callable[[KafkaError | None, Message], None]) -> None:
        value = json.dumps({"id": s.message_id, "n": s.n}).encode()
        stamped: list[tuple[str, str | bytes | None]] | None = None
        if self.settings.stamp_headers:
            stamped = [
                (headers.ID, s.message_id.encode()),
                (headers.PRODUCER, self.session.encode()),
                (headers.SEQ, str(s.seq).encode()),
            ]
        while True:
            try:
                self.producer.produce(
                    self.settings.topic,
                    value=value,
                    key=s.key.encode(),
                    partition=s.partition,
                    headers=stamped,
                    on_delivery=on_delivery,
                )
                return
            except BufferError:  # the local queue is full: serve delivery reports, then retry
                self.producer.poll(0.1)

    def wait_for_turn(self) -> bool:
        """Pace to the rate; False if asked to stop meanwhile."""
        if self.settings.rate is not None:
            due = self.started + self.counts["sent"] / self.settings.rate
            self.stop.wait(max(0.0, due - time.monotonic()))
        return not self.stop.is_set()

    def due_now(self, remaining: int) -> int:
        if self.settings.rate is None:
            return min(CHUNK, remaining)
        elapsed_due = int((time.monotonic() - self.started) * self.settings.rate) + 1
        return max(1, min(CHUNK, remaining, elapsed_due - self.counts["sent"]))

    # -- plain (idempotent or not) -----------------------------------------------------------

    def run_plain(self) -> None:
        def delivered(s: _Stamp) -> Callable[[KafkaError | None, Message], None]:
            def report(error: KafkaError | None, message: Message) -> None:
                if error is None:
                    self.record("acked", s, message.offset(), None)
                else:
                    self.record("failed", s, None, error.str())

            return report

        while (remaining := self.settings.messages - self.counts["sent"]) > 0:
            if not self.wait_for_turn():
                break
            for s in self.stamp(self.due_now(remaining)):
                self.produce(s, delivered(s))
            self.producer.poll(0)
            self.ledger.flush()
        # librdkafka retries each message until message.timeout.ms, then reports it failed.
        while len(self.producer) > 0:
            self.producer.flush(1.0)
            self.ledger.flush()

    # -- transactional -----------------------------------------------------------------------

    def run_transactional(self) -> None:
        _retrying(lambda: self.producer.init_transactions(30), "init_transactions", self.stop)
        transaction = 0
        while (remaining := self.settings.messages - self.counts["sent"]) > 0:
            if not self.wait_for_turn():
                break
            transaction += 1
            self.producer.begin_transaction()
            stamps = self.stamp(min(self.settings.transaction_size, remaining))
            for s in stamps:
                self.produce(s, self._pend(s))
            self.end_transaction(stamps, should_abort(transaction, self.settings.abort_every))

    def _pend(self, s: _Stamp) -> Callable[[KafkaError | None, Message], None]:
        def report(error: KafkaError | None, message: Message) -> None:
            offset = message.offset() if error is None else None
            self.pending[s.message_id] = (s, offset, None if error is None else error.str())

        return report

    def end_transaction(self, stamps: list[_Stamp], abort: bool) -> None:
        error: str | None = None
        if not abort:
            try:
                _retrying(lambda: self.producer.commit_transaction(60), "commit", self.stop)
            except KafkaException as failure:
                kafka_error: KafkaError = failure.args[0]
                if not kafka_error.txn_requires_abort():
                    raise
                error, abort = kafka_error.str(), True
        if abort:
            # Written first, so the aborted records really sit in the log (abort alone would
            # purge what is still queued): what read_uncommitted consumers then wrongly read.
            self.producer.flush(30)
            _retrying(lambda: self.producer.abort_transaction(60), "abort", self.stop)
        # Every message of an ended transaction gets its report (purged ones fail): serve them.
        try:
            wait_until(
                lambda: self.producer.poll(0) >= 0 and len(self.pending) >= len(stamps),
                30,
                "the ended transaction's delivery reports",
                interval=0.01,
            )
        except TimedOut:
            error = error or "no delivery report"
        event: Event = "aborted" if abort else "acked"
        for s in stamps:
            _, offset, delivery_error = self.pending.get(s.message_id, (s, None, None))
            self.record(event, s, offset, error or delivery_error)
        self.pending.clear()
        self.ledger.flush()


def _retrying(call: Callable[[], None], what: str, stop: threading.Event) -> None:
    """Retry a transactional call while the broker says the error is retriable (it went away,
    a coordinator moves), with backoff; anything else is raised."""
    backoff = 0.2
    deadline = time.monotonic() + 120
    while True:
        try:
            call()
            return
        except KafkaException as failure:
            error: KafkaError = failure.args[0]
            if not error.retriable() or time.monotonic() > deadline:
                raise
            print(f"dgm lab producer: {what} failed ({error.str()}), retrying", file=sys.stderr)
            stop.wait(backoff)
            backoff = min(backoff * 2, 5.0)


# How long a topic may be missing before the producer says so: one just created may not be
# in the metadata yet.
MISSING_TOPIC_GRACE_S = 10.0


def _partition_count(producer: Producer, topic: str) -> int:
    """The topic's partition count; a missing topic is an error after a short grace (it may
    just have been created), an unreachable cluster is retried for longer."""
    started, backoff = time.monotonic(), 0.1
    while True:
        try:
            found = producer.list_topics(topic, timeout=5).topics.get(topic)
        except KafkaException:
            found = None  # no broker answered: keep trying below
            if time.monotonic() - started > 120:
                raise ProducerSettingsError(
                    f"no broker answered for 2 minutes while looking up topic {topic!r}"
                ) from None
        else:
            if found is not None and found.error is None and found.partitions:
                return len(found.partitions)
            if time.monotonic() - started > MISSING_TOPIC_GRACE_S:
                raise ProducerSettingsError(f"topic {topic!r} does not exist or has no leader")
        time.sleep(backoff)
        backoff = min(backoff * 2, 2.0)


def run_producer(settings: ProducerSettings, stop: threading.Event | None = None) -> ProducerResult:
    """Produce `settings.messages` stamped messages (fewer if `stop` is set) and ledger them."""
    validate(settings)
    run = _Run(settings, stop or threading.Event())
    try:
        if settings.transactional_id is None:
            run.run_plain()
        else:
            run.run_transactional()
    finally:
        run.ledger.close()
    return run.result()


def settings_from_json(text: str) -> ProducerSettings:
    """ProducerSettings from a JSON object; unknown or mistyped keys are a clear error."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ProducerSettingsError(f"--settings-json is not JSON: {error}") from None
    if not isinstance(data, dict):
        raise ProducerSettingsError("--settings-json must be a JSON object")
    known = {f.name for f in fields(ProducerSettings)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ProducerSettingsError(f"unknown producer settings {unknown}; known: {sorted(known)}")
    try:
        data["ledger_path"] = Path(data["ledger_path"])
        settings = ProducerSettings(**data)
    except (KeyError, TypeError) as error:
        raise ProducerSettingsError(f"incomplete producer settings: {error}") from None
    validate(settings)
    return settings


def settings_to_json(settings: ProducerSettings) -> str:
    return json.dumps({**asdict(settings), "ledger_path": str(settings.ledger_path)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.producer")
    parser.add_argument("--settings-json", required=True, help="ProducerSettings; '-' = stdin")
    args = parser.parse_args(argv)
    text = sys.stdin.read() if args.settings_json == "-" else args.settings_json
    stop = threading.Event()
    # SIGTERM ends the run cleanly (ledger flushed); SIGKILL is the crash the lab is about.
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        result = run_producer(settings_from_json(text), stop)
    except UserFacingError as error:
        print(f"dgm lab producer: error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(asdict(result)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
