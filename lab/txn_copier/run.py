"""`run_copier_lab`: the Java transactional copier (TxnCopier.java) on a real cluster, with the
clients of a chosen Kafka version, aborting a drawn share of its transactions on purpose and
SIGKILLed while records flow, with a report.

Creates a source and a sink topic; starts the copier; produces a known set of stamped JSON
records (lab.producer) in transactions of which every `source_abort_every`-th is aborted (so
the source holds aborted records a copier must not deliver); SIGKILLs the copier `kills` times
at random moments after it has committed (restarting it each time: its initTransactions fences
the killed instance and aborts its open transaction); waits until its group has committed the
source's LSO and no transaction is open on the sink; stops it and writes a JSON report. What
reached the sink is left to an independent read of the topics: the report says only what was
done.
"""

from __future__ import annotations

import dataclasses
import json
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from dgm.util.waiting import wait_until
from embedded_kafka.java import find_java
from lab.java_child import ChildSpec, JavaSupervisor
from lab.java_kills import kill_while_working, kills_report
from lab.offsets import group_behind, no_open_transaction
from lab.runner import LabRun, produced, production_problems
from lab.topics import create_topic
from lab.txn_copier.build import MAIN_CLASS, CopierClasspath, resolve_classpath

Progress = Callable[[str], None]
# A kill lands this many seconds (uniformly drawn) after the instance committed a transaction.
KILL_AFTER = (0.3, 2.0)
HEAP = "-Xmx192m"  # the machine is shared: a small heap


@dataclass(frozen=True)
class CopierLabSettings:
    bootstrap_servers: str
    lab_dir: Path  # each run gets its own folder inside: ledger, logs, report
    clients_version: str  # the Kafka version whose Java clients the copier runs with
    name: str = "txn-copier"
    messages: int = 2000
    rate: float | None = 200.0  # source messages/s; None = as fast as possible
    kills: int = 3
    partitions: int = 3
    abort_percent: int = 20  # of the copier's transactions, aborted on purpose
    source_transaction_size: int = 10
    source_abort_every: int = 5  # every k-th source transaction is aborted (0: none)
    # read_uncommitted: the copier reads the source's aborted records too, and copies them
    # into its committed transactions (aborted reads, docs/design.md).
    isolation: str = "read_committed"
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
                (not 0 <= self.abort_percent <= 100, "abort_percent: 0 to 100"),
                (
                    self.isolation not in ("read_committed", "read_uncommitted"),
                    f"isolation: read_committed or read_uncommitted, got {self.isolation!r}",
                ),
            ],
        )


@dataclass(frozen=True)
class CopierLabReport:
    clients_version: str
    bootstrap_servers: str
    source_topic: str
    sink_topic: str
    group: str
    transactional_id: str
    messages: dict[str, int]  # requested, sent, acked, failed, aborted (source transactions)
    producer_session: str
    ledger_path: str
    transactions: dict[str, int]  # the copier's own count: committed, aborted, abortable
    kills: list[dict[str, Any]]
    kills_while_producing: int
    exits: list[dict[str, Any]]  # instances that died without being killed
    caught_up: bool
    started_at: float
    finished_at: float
    run_dir: str

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)


class Transactions:
    """What every instance of the copier said on stdout: its transactions, counted; shared by
    the instances, read by the kill loop (each line arrives on a reader thread)."""

    def __init__(self) -> None:
        self.counts = {"committed": 0, "aborted": 0, "abortable": 0}
        self._lock = threading.Lock()

    def readiness(self, line: str) -> bool | None:
        words = line.split()
        word = words[0] if words else ""
        if word in self.counts:
            with self._lock:
                self.counts[word] += 1
        return True if word == "ready" else None

    def committed(self) -> int:
        with self._lock:
            return self.counts["committed"]


def copier_command(classpath: CopierClasspath, arguments: list[str]) -> list[str]:
    return [
        str(find_java()), HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        "-cp", classpath.classpath, MAIN_CLASS, *arguments,
    ]  # fmt: skip


def run_copier_lab(settings: CopierLabSettings) -> CopierLabReport:
    run = LabRun.begin(settings.name, settings.lab_dir, settings.progress, settings.problems())
    names, run_dir = run.names, run.run_dir
    classpath = resolve_classpath(settings.clients_version, run.say)
    admin = AdminClient({"bootstrap.servers": settings.bootstrap_servers})
    for topic in (names.source, names.sink):
        create_topic(admin, topic, settings.partitions)
    transactional_id = f"{names.group}-copier"
    seed = settings.seed if settings.seed is not None else random.randrange(1 << 31)
    arguments = [
        "--bootstrap-servers", settings.bootstrap_servers, "--group", names.group,
        "--source", names.source, "--sink", names.sink,
        "--transactional-id", transactional_id,
        "--abort-percent", str(settings.abort_percent), "--seed", str(seed),
        "--isolation", settings.isolation,
    ]  # fmt: skip
    said = Transactions()
    spec = ChildSpec(copier_command(classpath, arguments), run_dir / "logs", "copier",
                     said.readiness)  # fmt: skip
    supervisor = JavaSupervisor(spec, run.say)
    producer = dataclasses.replace(
        run.producer(settings.bootstrap_servers, settings.messages, settings.rate),
        transactional_id=f"{names.group}-source",
        transaction_size=settings.source_transaction_size,
        abort_every=settings.source_abort_every,
    )
    run.say(f"copier lab: Kafka {settings.clients_version} clients, source {names.source}")
    result, while_producing, caught_up = run.supervise(
        supervisor,
        lambda: supervisor.current.running,
        "the copier to be assigned its partitions",
        producer,
        lambda producer_done: _kill(supervisor, settings, said, seed, producer_done),
        lambda: _catch_up(admin, run, settings),
    )
    return run.write(
        CopierLabReport(
            clients_version=settings.clients_version,
            bootstrap_servers=settings.bootstrap_servers,
            source_topic=names.source,
            sink_topic=names.sink,
            group=names.group,
            transactional_id=transactional_id,
            **produced(result, producer),
            transactions=dict(said.counts),
            **kills_report(supervisor, while_producing),
            caught_up=caught_up,
            **run.timing(),
        )
    )


def _kill(
    supervisor: JavaSupervisor,
    settings: CopierLabSettings,
    said: Transactions,
    seed: int,
    producer_done: Callable[[], bool],
) -> int:
    """SIGKILL the copier `kills` times, each a random while after the running instance has
    committed a transaction (restarting it each time)."""

    def committing(number: int) -> None:
        process = supervisor.current
        wait_until(process.running.is_set, 120, f"instance {number} to run", interval=0.05)
        before = said.committed()
        wait_until(lambda: said.committed() > before, 120, f"instance {number} to commit", 0.05)

    chosen = random.Random(seed)
    return kill_while_working(
        supervisor, settings.kills, committing, KILL_AFTER, chosen, producer_done
    )


def _catch_up(admin: AdminClient, run: LabRun, settings: CopierLabSettings) -> bool:
    """Until the copier's group has committed the source's LSO on every partition and no
    transaction is open on the sink (its LSO is its high watermark)."""
    names = run.names

    def done() -> bool:
        behind = group_behind(admin, names.group, names.source, settings.partitions)
        return behind == 0 and no_open_transaction(admin, names.sink, settings.partitions)

    return run.caught_up(
        lambda: wait_until(done, settings.catch_up_timeout, "the copier to catch up", 0.5),
        "the copier caught up with the source",
    )
