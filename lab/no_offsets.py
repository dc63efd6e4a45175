"""`run_no_offsets`: the processor that commits no offsets anywhere Kafka can see
(lab.processors.position_file), SIGKILLed between keeping its position and producing.

Creates the topics, starts the processor under a Supervisor and the stamped producer, kills
the processor `crashes` times at evenly spaced points of the production, each right after it
has kept a batch's position in its file (so that batch is lost for good: at-most-once), waits
until the position file has reached the source's LSO, stops the processor cleanly and writes a
JSON report. Kafka holds no committed offsets for its group: only a deadline can claim its
records. The report names the batches each kill left claimed but unproduced; what really
reached the sink is for an independent read of the topics to say.

    python -m lab.no_offsets --bootstrap HOST:PORT [--messages N] [--crashes K]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from dgm.util.waiting import wait_until
from lab.killed_batches import KilledBatch, killed_batches, spanned
from lab.offsets import source_lso
from lab.processors.position_file import read_positions
from lab.processors.settings import ProcessorSettings
from lab.runner import LabRun, crash_evenly, produced
from lab.supervisor import Supervisor
from lab.topics import create_topic

COMMAND = (sys.executable, "-m", "lab.processors.position_file")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class NoOffsetsSettings:
    bootstrap_servers: str
    lab_dir: Path
    name: str = "no-offsets"
    messages: int = 2000
    rate: float | None = 200.0
    crashes: int = 3
    partitions: int = 3
    batch_size: int = 100
    step_delay: float = 0.3  # after each phase line: the window a kill lands in
    catch_up_timeout: float = 120.0
    seed: int | None = None
    progress: Progress | None = field(default=None, compare=False)


@dataclass(frozen=True)
class NoOffsetsReport:
    bootstrap_servers: str
    source_topic: str
    sink_topic: str
    group: str  # named by the processor's client, never joined, never committed to
    position_path: str
    messages: dict[str, int]
    producer_session: str
    ledger_path: str
    crashes: list[dict[str, Any]]
    lost_claims: list[KilledBatch]  # killed after keeping their position, before producing
    caught_up: bool
    started_at: float
    finished_at: float
    run_dir: str

    @property
    def claimed_lost(self) -> int:
        """Source offsets the kills left claimed and unproduced (each holds one record: the
        source is written without transactions, so no control markers)."""
        return spanned(self.lost_claims)

    def to_json(self) -> str:
        return json.dumps({**dataclasses.asdict(self), "claimed_lost": self.claimed_lost}, indent=2)


def run_no_offsets(settings: NoOffsetsSettings) -> NoOffsetsReport:
    run = LabRun.begin(settings.name, settings.lab_dir, settings.progress)
    names, run_dir, say = run.names, run.run_dir, run.say
    admin = AdminClient({"bootstrap.servers": settings.bootstrap_servers})
    for topic in (names.source, names.sink):
        create_topic(admin, topic, settings.partitions)
    position_path = run_dir / "position.json"
    processor = ProcessorSettings(
        bootstrap_servers=settings.bootstrap_servers,
        source_topic=names.source,
        group_id=names.group,
        sink_topic=names.sink,
        position_path=str(position_path),
        batch_size=settings.batch_size,
        step_delay=settings.step_delay,
        static_member=False,
    )
    producer = run.producer(settings.bootstrap_servers, settings.messages, settings.rate)
    say(f"no-offsets lab: source {names.source}, position file {position_path}")
    supervisor = Supervisor(
        "at-most-once", processor, run_dir / "logs", "between-commit-and-produce",
        settings.seed, say, command=COMMAND,
    )  # fmt: skip
    result, _, caught_up = run.supervise(
        supervisor,
        lambda: supervisor.main.ready,
        "the processor to start",
        producer,
        lambda done: crash_evenly(supervisor, producer, done, settings.crashes, say),
        lambda: _catch_up(admin, run, position_path, settings),
    )
    return run.write(
        NoOffsetsReport(
            bootstrap_servers=settings.bootstrap_servers,
            source_topic=names.source,
            sink_topic=names.sink,
            group=names.group,
            position_path=str(position_path),
            **produced(result, producer),
            crashes=[dataclasses.asdict(c) for c in supervisor.crashes],
            lost_claims=killed_batches(supervisor.crashes, run_dir / "logs", "committed"),
            caught_up=caught_up,
            **run.timing(),
        )
    )


def _catch_up(
    admin: AdminClient, run: LabRun, position_path: Path, settings: NoOffsetsSettings
) -> bool:
    def kept_to_end() -> bool:
        kept = read_positions(position_path)
        lso = source_lso(admin, run.names.source, settings.partitions)
        return all(kept.get(p, 0) >= end for p, end in lso.items())

    return run.caught_up(
        lambda: wait_until(
            kept_to_end, settings.catch_up_timeout, "the position file to reach the LSO"
        ),
        "the processor's position file reached the source's LSO",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.no_offsets")
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--crashes", type=int, default=3, help="SIGKILLs of the processor")
    parser.add_argument("--lab-dir", default="lab-runs", help="where each run gets a folder")
    args = parser.parse_args(argv)
    report = run_no_offsets(
        NoOffsetsSettings(
            args.bootstrap, Path(args.lab_dir), messages=args.messages, crashes=args.crashes
        )
    )
    print(report.to_json())
    return 0 if report.caught_up else 1


if __name__ == "__main__":
    sys.exit(main())
