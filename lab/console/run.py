"""`run_console_lab`: Kafka's console consumer piped into its console producer (lab.console.relay)
on a real cluster, SIGKILLed while records flow, with a report.

Creates a source and a sink topic, starts the relay, produces a known set of JSON records
(lab.producer: `{"id": ..., "n": ...}`, without any dgm header unless `stamp_headers` is on),
SIGKILLs the relay `kills` times at random moments while it is writing to the sink (its
consumer, then its producer drains; lab.console.relay says why in that order), restarting it
each time, and waits until the group has committed the whole source and the sink holds every
acknowledged id. Every start, kill, exit and restart is in `<run folder>/relay.log` with its UTC
time. What reached the sink, and how often, is left to an independent read of the topics.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from dgm.util.waiting import wait_until
from lab.console.relay import LOG4J2, ConsoleRelay, EventLog, RelayTopics, relay_commands
from lab.java_kills import kill_while_working
from lab.ledger import read_ledger
from lab.offsets import group_behind, source_lso
from lab.runner import LabRun, produced, production_problems
from lab.share_group import start_from_the_beginning
from lab.topics import create_topic

Progress = Callable[[str], None]
# A kill lands this many seconds (uniformly drawn) after the relay's sink started growing.
KILL_AFTER = (1.0, 3.0)
START_TIMEOUT = 120.0  # two JVMs start and the consumer joins its group within this


@dataclass(frozen=True)
class ConsoleLabSettings:
    bootstrap_servers: str
    lab_dir: Path  # each run gets its own folder inside: ledger, logs, relay.log, report
    name: str = "console"
    messages: int = 3000
    rate: float | None = 100.0  # source messages/s; None = as fast as possible
    kills: int = 3
    partitions: int = 3
    # The console consumer's auto-commit: a kill lands between two commits, after output.
    auto_commit_interval_ms: int = 1500
    stamp_headers: bool = False  # the source's dgm headers; the sink never gets any
    # The consumer is Kafka's console share consumer, its group a share group (KIP-932).
    share_group: bool = False
    # A share group keeps no offsets: the run has caught up once the sink holds every id and
    # has not grown for this long, past any redelivery (a killed member's records come back
    # within its session timeout: 6 s on brokers with lab.share_group.BROKER_TIMINGS).
    share_settle_s: float = 10.0
    catch_up_timeout: float = 120.0
    seed: int | None = None
    progress: Progress | None = field(default=None, compare=False)

    def problems(self) -> list[str]:
        interval = self.auto_commit_interval_ms
        return production_problems(
            self.messages,
            self.kills,
            self.rate,
            self.partitions,
            [(interval < 1, f"auto_commit_interval_ms: expected >= 1, got {interval}")],
        )


@dataclass(frozen=True)
class ConsoleLabReport:
    bootstrap_servers: str
    source_topic: str
    sink_topic: str
    group_id: str  # the console consumer's group (a share group with share_group)
    share_group: bool
    stamp_headers: bool
    auto_commit_interval_ms: int
    messages: dict[str, int]  # requested, sent, acked, failed, aborted
    producer_session: str
    ledger_path: str
    kills: list[dict[str, Any]]  # at, at_utc, process, pid, returncode
    kills_while_producing: int  # of the planned kills, those before the producer had finished
    restarts: list[dict[str, Any]]  # at, at_utc, consumer_pid, producer_pid
    exits: list[dict[str, Any]]  # ends without a SIGKILL: the producer's drains, deaths
    relay_log: str  # every start, kill, exit, restart and stop with its UTC time
    caught_up: bool
    started_at: float
    finished_at: float
    run_dir: str

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)


def run_console_lab(settings: ConsoleLabSettings) -> ConsoleLabReport:
    run = LabRun.begin(settings.name, settings.lab_dir, settings.progress, settings.problems())
    names, run_dir = run.names, run.run_dir
    admin = AdminClient({"bootstrap.servers": settings.bootstrap_servers})
    for topic in (names.source, names.sink):
        create_topic(admin, topic, settings.partitions)
    log_config = run_dir / "log4j2.properties"
    log_config.write_text(LOG4J2)
    topics = RelayTopics(
        settings.bootstrap_servers,
        names.source,
        names.sink,
        names.group,
        settings.auto_commit_interval_ms,
        settings.share_group,
    )
    if settings.share_group:
        start_from_the_beginning(admin, names.group)
    log = EventLog(run_dir / "relay.log", run.say)
    relay = ConsoleRelay(relay_commands(topics, log_config), run_dir / "logs", log)
    run.say(f"console lab: {names.source} -> {names.sink}, group {names.group}")
    producer = run.producer(
        settings.bootstrap_servers, settings.messages, settings.rate, settings.stamp_headers
    )

    def writing(number: int) -> None:
        # The killed relay's producer has drained and exited: growth is the new relay's.
        before = _end(admin, names.sink, settings.partitions)
        wait_until(
            lambda: _end(admin, names.sink, settings.partitions) > before,
            START_TIMEOUT,
            f"relay {number} to write to the sink",
            0.2,
        )

    def kills(producer_done: Callable[[], bool]) -> int:
        chosen = random.Random(settings.seed)
        return kill_while_working(relay, settings.kills, writing, KILL_AFTER, chosen, producer_done)

    # The first consumer reads from the beginning, however late it joins, but the records
    # are sent once it has joined its group: a relay that took longer to start than the
    # producer took to send would find a backlog, relay it within a second and commit it
    # before the first kill (on a busy machine both kills once found nothing uncommitted).
    result, while_producing, caught_up = run.supervise(
        relay,
        lambda: _Joined(relay, admin, None if settings.share_group else names.group),
        "the console relay to start",
        producer,
        kills,
        lambda: _catch_up(admin, run, settings, producer.ledger_path),
        START_TIMEOUT,
    )
    return run.write(
        ConsoleLabReport(
            bootstrap_servers=settings.bootstrap_servers,
            source_topic=names.source,
            sink_topic=names.sink,
            group_id=names.group,
            share_group=settings.share_group,
            stamp_headers=settings.stamp_headers,
            auto_commit_interval_ms=settings.auto_commit_interval_ms,
            **produced(result, producer),
            kills=[dataclasses.asdict(k) for k in relay.kills],
            kills_while_producing=while_producing,
            restarts=[dataclasses.asdict(r) for r in relay.restarts],
            exits=[dataclasses.asdict(e) for e in relay.exits],
            relay_log=str(log.path),
            caught_up=caught_up,
            **run.timing(),
        )
    )


@dataclass(frozen=True)
class _Joined:
    """Set once the relay has started and its consumer has joined `group` (None: a share
    group's, which started is enough for)."""

    relay: ConsoleRelay
    admin: AdminClient
    group: str | None

    def is_set(self) -> bool:
        if not self.relay.started.is_set():
            return False
        if self.group is None:
            return True
        try:
            found = self.admin.describe_consumer_groups([self.group], request_timeout=5)
            return bool(found[self.group].result().members)
        except Exception:  # not there yet, or the broker is busy: asked again
            return False


def _end(admin: AdminClient, topic: str, partitions: int) -> int:
    """Records in `topic` (no transactions in it: its LSO is its end)."""
    return sum(source_lso(admin, topic, partitions).values())


def _catch_up(admin: AdminClient, run: LabRun, settings: ConsoleLabSettings, ledger: Path) -> bool:
    """Until the group has committed the source's end on every partition and the sink holds
    every id the source producer had acknowledged."""
    names = run.names
    expected = set(read_ledger(ledger).acked)

    settled = _Settled(settings.share_settle_s)

    def done(sink: _SinkIds) -> bool:
        sink.advance()
        if settings.share_group:
            return settled(_end(admin, names.sink, settings.partitions)) and expected <= sink.ids
        behind = group_behind(admin, names.group, names.source, settings.partitions)
        return behind == 0 and expected <= sink.ids

    def wait() -> None:
        with _SinkIds(settings.bootstrap_servers, names.sink, settings.partitions) as sink:
            wait_until(lambda: done(sink), settings.catch_up_timeout, "the relay to catch up", 0.5)

    return run.caught_up(wait, "the console relay caught up with the source")


class _Settled:
    """Called with a topic's end, again and again: True once it has not moved for `quiet_s`."""

    def __init__(self, quiet_s: float) -> None:
        self.quiet_s = quiet_s
        self.end: int | None = None
        self.since = time.monotonic()

    def __call__(self, end: int) -> bool:
        if end != self.end:
            self.end, self.since = end, time.monotonic()
        return time.monotonic() - self.since >= self.quiet_s


class _SinkIds:
    """The ids (the JSON values' "id") read so far from a topic, followed from its start."""

    def __init__(self, bootstrap_servers: str, topic: str, partitions: int) -> None:
        self.ids: set[str] = set()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap_servers,
                "group.id": f"lab-sink-ids-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
            }
        )
        self._consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])

    def advance(self) -> None:
        for message in self._consumer.consume(1000, 0.2):
            error = message.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(f"reading the sink: {error}")
            if error is not None:
                continue
            try:
                found = json.loads(message.value() or b"null").get("id")
            except (ValueError, AttributeError):
                continue  # no JSON object: no id to find
            if isinstance(found, str):
                self.ids.add(found)

    def __enter__(self) -> _SinkIds:
        return self

    def __exit__(self, *_: object) -> None:
        self._consumer.close()
