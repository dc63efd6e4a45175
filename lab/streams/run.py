"""`run_streams_lab`: the Kafka Streams application on a real cluster, SIGKILLed while records
flow, with a report.

Creates a source and a sink topic, starts the application, produces a known set of stamped
JSON records (lab.producer: `{"id": ..., "n": ...}`, with the dgm-id header unless
`stamp_headers` is off; the application forwards headers as they are), SIGKILLs the
application `kills` times at random moments while it is processing (restarting it each time),
waits until its consumer group (the application.id) has committed the whole source and the
sink holds no open transaction, stops it and writes a JSON report. What reached the sink is
left to an independent read of the topics: the report says only what was done.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from dgm.util.waiting import wait_until
from lab.java_child import JavaSupervisor
from lab.java_kills import kill_while_working, kills_report
from lab.offsets import group_behind, high_watermarks, no_open_transaction
from lab.runner import LabRun, produced, production_problems
from lab.streams.app import GUARANTEES, AppSettings, Guarantee, app_command, streams_supervisor
from lab.streams.jars import resolve_classpath
from lab.topics import create_topic

Progress = Callable[[str], None]
# A kill lands this many seconds (uniformly drawn) after the instance started processing.
KILL_AFTER = (1.0, 4.0)


@dataclass(frozen=True)
class StreamsLabSettings:
    bootstrap_servers: str
    lab_dir: Path  # each run gets its own folder inside: ledger, logs, state, report
    guarantee: Guarantee
    drop_every_tenth: bool = False
    name: str = "streams"
    messages: int = 3000
    rate: float | None = 100.0  # source messages/s; None = as fast as possible
    kills: int = 3
    partitions: int = 3
    commit_interval_ms: int | None = None
    stamp_headers: bool = True  # False: the source records carry no dgm header
    catch_up_timeout: float = 120.0
    seed: int | None = None
    progress: Progress | None = field(default=None, compare=False)

    def problems(self) -> list[str]:
        return production_problems(
            self.messages,
            self.kills,
            self.rate,
            self.partitions,
            [(self.guarantee not in GUARANTEES, f"guarantee: one of {', '.join(GUARANTEES)}")],
        )


@dataclass(frozen=True)
class StreamsLabReport:
    guarantee: str
    drop_every_tenth: bool
    bootstrap_servers: str
    source_topic: str
    sink_topic: str
    application_id: str  # = the consumer group Kafka Streams commits to
    messages: dict[str, int]  # requested, sent, acked, failed, aborted
    producer_session: str
    ledger_path: str
    kills: list[dict[str, Any]]
    kills_while_producing: int  # of the kills, those before the producer had finished
    exits: list[dict[str, Any]]  # instances that died without being killed
    caught_up: bool
    started_at: float
    finished_at: float
    run_dir: str

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)


def run_streams_lab(settings: StreamsLabSettings) -> StreamsLabReport:
    run = LabRun.begin(settings.name, settings.lab_dir, settings.progress, settings.problems())
    names, run_dir = run.names, run.run_dir
    classpath = resolve_classpath(run.say)
    admin = AdminClient({"bootstrap.servers": settings.bootstrap_servers})
    for topic in (names.source, names.sink):
        create_topic(admin, topic, settings.partitions)
    app = AppSettings(
        bootstrap_servers=settings.bootstrap_servers,
        application_id=names.group,
        source=names.source,
        sink=names.sink,
        state_dir=run_dir / "state",
        guarantee=settings.guarantee,
        drop_every_tenth=settings.drop_every_tenth,
        commit_interval_ms=settings.commit_interval_ms,
    )
    run.say(f"streams lab: {settings.guarantee}, source {names.source}, app {names.group}")
    supervisor = streams_supervisor(app_command(classpath, app), run_dir / "logs", run.say)
    producer = run.producer(
        settings.bootstrap_servers, settings.messages, settings.rate, settings.stamp_headers
    )
    sink_end = functools.partial(_sink_end, admin, names.sink, settings.partitions)
    result, while_producing, caught_up = run.supervise(
        supervisor,
        lambda: supervisor.current.running,
        "the Streams application to run",
        producer,
        lambda producer_done: _kill(supervisor, settings, producer_done, sink_end),
        lambda: _catch_up(admin, run, settings),
    )
    return run.write(
        StreamsLabReport(
            guarantee=settings.guarantee,
            drop_every_tenth=settings.drop_every_tenth,
            bootstrap_servers=settings.bootstrap_servers,
            source_topic=names.source,
            sink_topic=names.sink,
            application_id=names.group,
            **produced(result, producer),
            **kills_report(supervisor, while_producing),
            caught_up=caught_up,
            **run.timing(),
        )
    )


def _kill(
    supervisor: JavaSupervisor,
    settings: StreamsLabSettings,
    producer_done: Callable[[], bool],
    sink_end: Callable[[], int],
) -> int:
    """SIGKILL the instance `kills` times, each a random while after it has started writing to
    the sink (restarting it each time); how many kills came before the producer had finished."""

    def writing(number: int) -> None:
        process = supervisor.current
        wait_until(process.running.is_set, 120, f"instance {number} to run", interval=0.05)
        wait_until(_grows(sink_end), 120, f"instance {number} to write", interval=0.2)

    chosen = random.Random(settings.seed)
    return kill_while_working(
        supervisor, settings.kills, writing, KILL_AFTER, chosen, producer_done
    )


def _grows(measure: Callable[[], int]) -> Callable[[], bool]:
    """A condition: `measure` is above what it was when the condition was made."""
    before = measure()
    return lambda: measure() > before


def _catch_up(admin: AdminClient, run: LabRun, settings: StreamsLabSettings) -> bool:
    """Until the application's group has committed the source's LSO on every partition and no
    transaction is open on the sink (its LSO is its high watermark)."""
    names = run.names

    def done() -> bool:
        behind = group_behind(admin, names.group, names.source, settings.partitions)
        return behind == 0 and no_open_transaction(admin, names.sink, settings.partitions)

    return run.caught_up(
        lambda: wait_until(
            done, settings.catch_up_timeout, "the Streams application to catch up", 0.5
        ),
        "the Streams application caught up with the source",
    )


def _sink_end(admin: AdminClient, topic: str, partitions: int) -> int:
    return sum(high_watermarks(admin, topic, partitions).values())
