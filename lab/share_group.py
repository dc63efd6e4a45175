"""`run_share_group`: the share-group relay (lab.processors.share_relay) SIGKILLed between its
two steps: after producing a batch and before acknowledging it (`produce-first`: the batch
is redelivered and copied again), or after acknowledging it and before producing it
(`acknowledge-first`: the batch is lost).

Creates the topics, starts the relay under a Supervisor and the stamped producer, kills the
relay `crashes` times at evenly spaced points of the production, each right after the step
the order makes first, and waits until every source record has been acknowledged (the
relays' transcripts say which; Kafka keeps no committed offsets for a share group). The
report names the batches each kill left produced and unacknowledged (redelivered) or
acknowledged and unproduced (lost); what really reached the sink is for an independent read
of the topics to say.

Redelivery waits for the acquisition lock to expire, and the records a killed member held
for the member's session to end: 30 s and 45 s at the broker's defaults, which allow no less
than 15 s and 45 s. BROKER_TIMINGS are broker properties that make both a few seconds
(tests/support/kafka_cluster.py starts the tests' brokers with them).

    python -m lab.share_group --bootstrap HOST:PORT [--order acknowledge-first]
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

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from dgm.util.waiting import wait_until
from lab.killed_batches import KilledBatch, killed_batches, spanned, transcript_lines
from lab.offsets import source_lso
from lab.processors.announce import Phase
from lab.processors.position_file import parse_claim
from lab.processors.settings import ProcessorSettings
from lab.processors.share_relay import Order
from lab.runner import LabRun, crash_evenly, produced
from lab.supervisor import Supervisor
from lab.topics import create_topic

COMMAND = (sys.executable, "-m", "lab.processors.share_relay")
# Broker properties: acquisition locks of 2 s and member sessions of 6 s (KIP-932's bounds
# lowered to allow them). Unknown to brokers without share groups, which ignore them.
BROKER_TIMINGS = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": "2000",
    "group.share.min.session.timeout.ms": "3000",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.heartbeat.interval.ms": "2000",
}
Progress = Callable[[str], None]


@dataclass(frozen=True)
class ShareGroupSettings:
    bootstrap_servers: str
    lab_dir: Path
    order: Order = "produce-first"
    name: str = "share-group"
    messages: int = 1000
    rate: float | None = 200.0
    crashes: int = 2
    partitions: int = 3
    step_delay: float = 0.3  # after each phase line: the window a kill lands in
    catch_up_timeout: float = 120.0
    seed: int | None = None
    progress: Progress | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ShareGroupReport:
    bootstrap_servers: str
    source_topic: str
    sink_topic: str
    group: str  # the share group
    order: str
    messages: dict[str, int]
    producer_session: str
    ledger_path: str
    crashes: list[dict[str, Any]]
    # The batches the kills left between the two steps: produced and unacknowledged
    # (produce-first: delivered again), or acknowledged and unproduced (acknowledge-first).
    killed_between: list[KilledBatch]
    redelivered: int  # records polled again, by the broker's delivery counts
    caught_up: bool
    started_at: float
    finished_at: float
    run_dir: str

    @property
    def killed_records(self) -> int:
        return spanned(self.killed_between)

    def to_json(self) -> str:
        found = {**dataclasses.asdict(self), "killed_records": self.killed_records}
        return json.dumps(found, indent=2)


def run_share_group(settings: ShareGroupSettings) -> ShareGroupReport:
    run = LabRun.begin(settings.name, settings.lab_dir, settings.progress)
    names, run_dir, say = run.names, run.run_dir, run.say
    admin = AdminClient({"bootstrap.servers": settings.bootstrap_servers})
    for topic in (names.source, names.sink):
        create_topic(admin, topic, settings.partitions)
    start_from_the_beginning(admin, names.group)
    relay = ProcessorSettings(
        bootstrap_servers=settings.bootstrap_servers,
        source_topic=names.source,
        group_id=names.group,
        sink_topic=names.sink,
        step_delay=settings.step_delay,
        static_member=False,
    )
    producer = run.producer(settings.bootstrap_servers, settings.messages, settings.rate)
    say(f"share-group lab ({settings.order}): source {names.source}, share group {names.group}")
    command = (*COMMAND, "--order", settings.order)
    if settings.order == "produce-first":
        first: Phase = "produced"
        supervisor = Supervisor(
            "at-least-once", relay, run_dir / "logs", "between-produce-and-commit",
            settings.seed, say, command=command,
        )  # fmt: skip
    else:
        first = "committed"
        supervisor = Supervisor(
            "at-most-once", relay, run_dir / "logs", "between-commit-and-produce",
            settings.seed, say, command=command,
        )  # fmt: skip
    result, _, caught_up = run.supervise(
        supervisor,
        lambda: supervisor.main.ready,
        "the relay to start",
        producer,
        lambda done: crash_evenly(supervisor, producer, done, settings.crashes, say),
        lambda: _catch_up(admin, run, settings),
    )
    return run.write(
        ShareGroupReport(
            bootstrap_servers=settings.bootstrap_servers,
            source_topic=names.source,
            sink_topic=names.sink,
            group=names.group,
            order=settings.order,
            **produced(result, producer),
            crashes=[dataclasses.asdict(c) for c in supervisor.crashes],
            killed_between=killed_batches(supervisor.crashes, run_dir / "logs", first),
            redelivered=redelivered(run_dir / "logs"),
            caught_up=caught_up,
            **run.timing(),
        )
    )


def start_from_the_beginning(admin: AdminClient, group: str) -> None:
    """The share group's `share.auto.offset.reset`: earliest (a new share group starts at
    the end of each partition by default, past what the producer wrote before it joined)."""
    entry = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def acknowledged(log_dir: Path) -> dict[int, set[int]]:
    """Source partition -> offsets of the batches whose acknowledgement the broker took."""
    claims: dict[tuple[int, int], list[dict[int, tuple[int, int]]]] = {}
    done: set[tuple[int, int]] = set()
    for pid, said in transcript_lines(log_dir):
        claim = parse_claim(said)
        if claim is not None:
            claims.setdefault((pid, claim[0]), []).append(claim[1])
        elif said.startswith("phase committed "):
            done.add((pid, int(said.split()[2])))
    found: dict[int, set[int]] = {}
    for key in done:
        for spans in claims.get(key, []):
            for partition, (first, end) in spans.items():
                found.setdefault(partition, set()).update(range(first, end))
    return found


def redelivered(log_dir: Path) -> int:
    """Records the relays polled with a delivery count above 1 (the broker's word)."""
    return sum(
        int(said.split()[2])
        for _, said in transcript_lines(log_dir)
        if said.startswith("redelivered ")
    )


def _catch_up(admin: AdminClient, run: LabRun, settings: ShareGroupSettings) -> bool:
    def all_acknowledged() -> bool:
        done = acknowledged(run.run_dir / "logs")
        lso = source_lso(admin, run.names.source, settings.partitions)
        return all(done.get(p, set()) >= set(range(end)) for p, end in lso.items())

    return run.caught_up(
        lambda: wait_until(
            all_acknowledged, settings.catch_up_timeout, "every source record acknowledged"
        ),
        "the share group acknowledged every source record",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.share_group")
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    parser.add_argument(
        "--order",
        choices=("produce-first", "acknowledge-first"),
        default="produce-first",
        help="produce a batch, then acknowledge it (kills: redelivery), or the other way round "
        "(kills: losses); default produce-first",
    )
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--crashes", type=int, default=2, help="SIGKILLs of the relay")
    parser.add_argument("--lab-dir", default="lab-runs", help="where each run gets a folder")
    args = parser.parse_args(argv)
    order: Order = "acknowledge-first" if args.order == "acknowledge-first" else "produce-first"
    report = run_share_group(
        ShareGroupSettings(
            args.bootstrap, Path(args.lab_dir), order, messages=args.messages,
            crashes=args.crashes,
        )
    )  # fmt: skip
    print(report.to_json())
    return 0 if report.caught_up else 1


if __name__ == "__main__":
    sys.exit(main())
