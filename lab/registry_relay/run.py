"""`run_registry_lab`: the re-serializing relay (relay.py) on a real cluster and a real schema
registry, SIGKILLed while records flow, with a report.

Creates a source and a sink topic; produces `messages` v1 orders (schemas.py: Avro, JSON Schema
or Protobuf) through the registry, each acknowledged once; starts the relay, paced, and
SIGKILLs it `kills` times, each after a batch's flush and before its commit (a drawn number of
batches let through first), restarting it at once; waits until its group has committed the
source's end; stops it (it flushes and commits) and writes a JSON report. Every start, kill
and stop is in `<run folder>/relay.log` with its UTC time. What reached the sink, and how
often, is left to an independent read of the topics.

The kills are aimed, not timed: a kill a drawn moment after the sink grew once landed, on the
loaded CI machine, where nothing was left uncommitted, and a run meant to duplicate had none.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext

from dgm.util.waiting import wait_until
from lab import child_process
from lab.offsets import group_behind
from lab.registry_relay.schemas import Format, order, serializer
from lab.topics import create_topic

LET_THROUGH = (0, 2)  # batches committed before each kill, drawn
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


@dataclass(frozen=True)
class RegistryLabSettings:
    bootstrap_servers: str
    registry_url: str  # the Confluent-compatible API
    lab_dir: Path
    messages: int = 1500
    rate: float = 150.0  # source records a second: the kills land while it produces
    kills: int = 3
    partitions: int = 3
    commit_every: int = 50
    seed: int = 11
    format: Format = "avro"


@dataclass(frozen=True)
class RegistryLabReport:
    source_topic: str
    sink_topic: str
    group_id: str
    acked: int  # source records the producer had acknowledged (each once)
    kills: list[dict[str, object]]  # at_utc, pid, returncode
    caught_up: bool
    relay_log: str
    run_dir: str

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)


class _Relay:
    """The paced relay process, restarted after each kill; every event in relay.log. A kill is
    sent by the thread reading its stdout, on a `flushed` line it then leaves unanswered."""

    def __init__(self, command: list[str], run_dir: Path) -> None:
        self.command, self.run_dir = command, run_dir
        self.log = (run_dir / "relay.log").open("a", buffering=1)
        self.kills: list[dict[str, object]] = []
        self.process: subprocess.Popen[str] | None = None
        self.let_through: int | None = None  # batches before the aimed kill; None: no kill
        self.killed = threading.Event()
        self.lock = threading.Lock()  # the aim
        self.stdin_lock = threading.Lock()

    def note(self, line: str) -> None:
        self.log.write(f"{datetime.now(UTC).isoformat()} {line}\n")

    def start(self) -> None:
        process = child_process.spawn(
            [*self.command, "--paced"], self.run_dir / "relay.err", subprocess.PIPE
        )
        self.process = process
        child_process.transcribe(
            process, self.run_dir / "relay.out", lambda line: self._read(process, line)
        )
        self.note(f"started pid {process.pid}")

    def aim(self, let_through: int) -> None:
        """Kill the relay after `let_through` more batches are flushed and committed."""
        with self.lock:
            self.killed.clear()
            self.let_through = let_through

    def _read(self, process: subprocess.Popen[str], line: str) -> None:
        if line.strip() != "flushed":
            return
        with self.lock:
            if self.let_through == 0:
                os.kill(process.pid, signal.SIGKILL)  # flushed, not committed
                self.let_through = None
                self.killed.set()
                return
            if self.let_through is not None:
                self.let_through -= 1
        child_process.answer_go(process, self.stdin_lock)

    def restart(self) -> None:
        """Wait for the aimed kill's process to end, then start the next one."""
        assert self.process is not None
        pid = self.process.pid
        code = self.process.wait(STOP_TIMEOUT)
        self.kills.append({"at_utc": datetime.now(UTC).isoformat(), "pid": pid, "returncode": code})
        self.note(f"SIGKILL pid {pid} after a flush, before its commit (exit {code})")
        self.start()

    def stop(self) -> None:
        with self.lock:
            self.let_through = None
        if self.process is not None:
            child_process.end_input(self.process, self.stdin_lock)  # a waiting relay goes on
            code = child_process.stop(self.process, STOP_TIMEOUT)
            self.note(f"stopped pid {self.process.pid} (exit {code})")
        self.log.close()


def run_registry_lab(settings: RegistryLabSettings) -> RegistryLabReport:
    name = f"{settings.format.replace('_', '-')}-{uuid.uuid4().hex[:8]}"
    run_dir = settings.lab_dir / name
    run_dir.mkdir(parents=True)
    source, sink, group = f"{name}-source", f"{name}-sink", name
    admin = AdminClient({"bootstrap.servers": settings.bootstrap_servers})
    for topic in (source, sink):
        create_topic(admin, topic, settings.partitions)
    relay = _Relay(
        [
            sys.executable, "-m", "lab.registry_relay.relay",
            "--bootstrap", settings.bootstrap_servers, "--registry", settings.registry_url,
            "--source", source, "--sink", sink, "--group", group,
            "--commit-every", str(settings.commit_every), "--format", settings.format,
        ],
        run_dir,
    )  # fmt: skip
    acked: list[int] = []
    producing = threading.Thread(target=_produce, args=(settings, source, acked), daemon=True)
    producing.start()
    relay.start()
    chosen = random.Random(settings.seed)

    def idle() -> bool:  # too little left uncommitted for another batch's flush
        if producing.is_alive():
            return False
        return group_behind(admin, group, source, settings.partitions) < settings.commit_every

    try:
        for number in range(settings.kills):
            relay.aim(chosen.randint(*LET_THROUGH))
            wait_until(
                lambda: relay.killed.is_set() or idle(), START_TIMEOUT, f"kill {number + 1}", 0.1
            )
            if not relay.killed.is_set():
                relay.note(f"kill {number + 1} skipped: too little left for another batch")
                break
            relay.restart()
        producing.join(settings.messages / settings.rate + 60)
        caught_up = _catch_up(admin, source, group, settings)
    finally:
        relay.stop()
    report = RegistryLabReport(
        source, sink, group, len(acked), relay.kills, caught_up, str(run_dir / "relay.log"),
        str(run_dir),
    )  # fmt: skip
    (run_dir / "report.json").write_text(report.to_json())
    return report


def _produce(settings: RegistryLabSettings, topic: str, acked: list[int]) -> None:
    """The source records, v1, at `rate`, each acknowledged once (idempotent producer)."""
    writer = serializer(settings.format, SchemaRegistryClient({"url": settings.registry_url}), 1)
    producer = Producer(
        {"bootstrap.servers": settings.bootstrap_servers, "enable.idempotence": True}
    )
    began = time.monotonic()
    for n in range(settings.messages):
        record = order(n)
        value = writer(record, SerializationContext(topic, MessageField.VALUE))
        producer.produce(
            topic, value=value, key=str(record["order_id"]).encode(), on_delivery=_acked(acked, n)
        )
        producer.poll(0)
        time.sleep(max(0.0, began + (n + 1) / settings.rate - time.monotonic()))
    if producer.flush(60) != 0:
        raise RuntimeError("source records not acknowledged within 60 s")


def _acked(acked: list[int], n: int) -> Callable[[object, object], None]:
    def delivered(error: object, _message: object) -> None:
        if error is None:
            acked.append(n)

    return delivered


def _catch_up(admin: AdminClient, source: str, group: str, settings: RegistryLabSettings) -> bool:
    try:
        wait_until(
            lambda: group_behind(admin, group, source, settings.partitions) == 0,
            120,
            "the relay's group to commit the source's end",
            0.5,
        )
    except AssertionError:
        return False
    return True
