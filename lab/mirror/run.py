"""`run_mirror_lab`: MirrorMaker 2 replicating a topic from cluster a to cluster b through
SIGKILLs, or stopped for good, with a report.

Creates the source topic on a, starts MirrorMaker 2 (dedicated mode, lab.mirror.config),
produces a known set of stamped JSON records to it (lab.producer: `{"id": ..., "n": ...}`, with
the dgm-id header unless `stamp_headers` is off) and meanwhile, once MirrorMaker 2 is writing
to b's replica:
- "kill": SIGKILLs it `kills` times at random moments, restarting it each time, then waits
  until the replica has caught up (lab.mirror.tails) and stops it;
- "stop": stops it for good; the records produced after that never reach b.
What reached b is left to an independent read of both topics: the report says what was done.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from confluent_kafka.admin import AdminClient

from dgm.util.ports import free_ports
from dgm.util.waiting import wait_until
from embedded_kafka.java import find_java
from lab.java_child import ChildSpec, JavaSupervisor
from lab.java_kills import kill_while_working, kills_report
from lab.mirror.config import POLICIES, MirrorSettings, ReplicationPolicy, mm2_properties, render
from lab.mirror.jars import MAIN_CLASS, MirrorClasspath, resolve_classpath
from lab.mirror.tails import TopicTail
from lab.runner import LabRun, produced, production_problems
from lab.topics import create_topic

Progress = Callable[[str], None]
Fault = Literal["kill", "stop"]
FAULTS: tuple[str, ...] = get_args(Fault)
HEAP = "-Xmx256m"  # the machine is shared: a small heap, one task
# A kill (or the stop) lands this many seconds (uniformly drawn) after replication resumed.
FAULT_AFTER = (1.0, 3.0)
READY_TIMEOUT = 180.0  # a Connect worker joins its group and starts its task within this


@dataclass(frozen=True)
class MirrorLabSettings:
    source_bootstrap: str  # cluster a
    target_bootstrap: str  # cluster b
    lab_dir: Path  # each run gets its own folder inside: ledger, logs, mm2.properties, report
    fault: Fault = "kill"
    exactly_once: bool = False
    policy: ReplicationPolicy = "default"
    name: str = "mirror"
    messages: int = 3000
    rate: float | None = 100.0  # source messages/s; None = as fast as possible
    kills: int = 3
    partitions: int = 3
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
            [
                (self.fault not in FAULTS, f"fault: one of {', '.join(FAULTS)}"),
                (self.policy not in POLICIES, f"policy: one of {', '.join(POLICIES)}"),
            ],
        )


@dataclass(frozen=True)
class MirrorLabReport:
    fault: str
    exactly_once: bool
    policy: str
    source_bootstrap: str  # cluster a
    target_bootstrap: str  # cluster b
    source_topic: str  # on a
    replica_topic: str  # on b
    messages: dict[str, int]  # requested, sent, acked, failed, aborted
    producer_session: str
    ledger_path: str
    kills: list[dict[str, Any]]
    kills_while_producing: int  # of the kills, those before the producer had finished
    exits: list[dict[str, Any]]  # instances that died without being killed
    stopped_at: float | None  # "stop": unix time MirrorMaker 2 was stopped for good
    caught_up: bool  # "kill": the replica's last record of each partition is the source's
    started_at: float
    finished_at: float
    run_dir: str

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)


def run_mirror_lab(settings: MirrorLabSettings) -> MirrorLabReport:
    run = LabRun.begin(settings.name, settings.lab_dir, settings.progress, settings.problems())
    names, run_dir, say = run.names, run.run_dir, run.say
    classpath = resolve_classpath(say)
    create_topic(
        AdminClient({"bootstrap.servers": settings.source_bootstrap}),
        names.source,
        settings.partitions,
    )
    mirror = MirrorSettings(
        source_bootstrap=settings.source_bootstrap,
        target_bootstrap=settings.target_bootstrap,
        topic=names.source,
        run_id=names.group,
        exactly_once=settings.exactly_once,
        policy=settings.policy,
        rest_port=free_ports(1)[0],
    )
    (run_dir / "mm2.properties").write_text(render(mm2_properties(mirror)))
    say(
        f"mirror lab: a/{names.source} -> b/{mirror.replica_topic}, "
        f"{'exactly-once' if settings.exactly_once else 'at-least-once'}, {settings.fault}"
    )
    spec = ChildSpec(
        mirror_command(classpath, run_dir / "mm2.properties"), run_dir / "logs", "mm2", task_started
    )
    supervisor = JavaSupervisor(spec, say)
    producer = run.producer(
        settings.source_bootstrap, settings.messages, settings.rate, settings.stamp_headers
    )
    replica = TopicTail(settings.target_bootstrap, mirror.replica_topic, settings.partitions)

    def replicating(number: int) -> None:
        _await_replication(supervisor, replica, f"MirrorMaker 2 instance {number}")

    def faults(producer_done: Callable[[], bool]) -> tuple[int, float | None]:
        """How many kills came before the producer had finished; when it was stopped."""
        chosen = random.Random(settings.seed)
        if settings.fault == "kill":
            while_producing = kill_while_working(
                supervisor, settings.kills, replicating, FAULT_AFTER, chosen, producer_done
            )
            return while_producing, None
        _await_replication(supervisor, replica, "MirrorMaker 2")
        time.sleep(chosen.uniform(*FAULT_AFTER))  # a drawn moment, not a wait
        supervisor.stop()
        stopped_at = time.time()
        say(f"MirrorMaker 2 stopped for good after {replica.records} replica records")
        return 0, stopped_at

    with replica:
        # Records flow from its start on: every fault lands while MirrorMaker 2 is replicating.
        result, (while_producing, stopped_at), caught_up = run.supervise(
            supervisor,
            lambda: supervisor.current.running,
            "MirrorMaker 2 to start",
            producer,
            faults,
            lambda: settings.fault == "kill" and _catch_up(settings, run, replica),
            READY_TIMEOUT,
        )
    return run.write(
        MirrorLabReport(
            fault=settings.fault,
            exactly_once=settings.exactly_once,
            policy=settings.policy,
            source_bootstrap=settings.source_bootstrap,
            target_bootstrap=settings.target_bootstrap,
            source_topic=names.source,
            replica_topic=mirror.replica_topic,
            **produced(result, producer),
            **kills_report(supervisor, while_producing),
            stopped_at=stopped_at,
            caught_up=caught_up,
            **run.timing(),
        )
    )


def mirror_command(classpath: MirrorClasspath, properties: Path) -> list[str]:
    """Dedicated-mode MirrorMaker 2 driving only the flows into cluster b."""
    return [
        str(find_java()), HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        f"-Dlog4j2.configurationFile={classpath.log_config}",
        "-cp", classpath.classpath, MAIN_CLASS, str(properties), "--clusters", "b",
    ]  # fmt: skip


def task_started(line: str) -> bool | None:
    """Ready once its MirrorSourceConnector task says it started (Connect's
    AbstractWorkerSourceTask logs `... Source task finished initialization and start`)."""
    if "MirrorSourceConnector" in line and "Source task finished initialization" in line:
        return True
    return None


def _await_replication(supervisor: JavaSupervisor, replica: TopicTail, what: str) -> None:
    """Until the current instance has started its task and new records reach the replica."""
    wait_until(supervisor.current.running.is_set, READY_TIMEOUT, f"{what} to start", 0.1)
    wait_until(lambda: replica.advance() > 0, READY_TIMEOUT, f"{what} to write to b", 0)


def _catch_up(settings: MirrorLabSettings, run: LabRun, replica: TopicTail) -> bool:
    """Until the replica's last committed record of each partition is the source's last."""
    source_topic = run.names.source

    def wait() -> None:
        with TopicTail(settings.source_bootstrap, source_topic, settings.partitions) as source:
            wait_until(source.at_end, 60, f"reading {source_topic} to its end", 0)
            wait_until(
                lambda: replica.advance() >= 0 and replica.last == source.last,
                settings.catch_up_timeout,
                "the replica to catch up",
                0,
            )

    return run.caught_up(wait, "the replica caught up with the source")
