"""`run_lab`: one lab pipeline on a real cluster, driven through real faults, with a report.

Creates the topics, starts the processor (under a Supervisor) and the stamped producer, does
the faults at evenly spaced points of the production, waits until the processor has caught up
(the group's committed offsets, or the idempotent sink's stored offsets, reach the source's
LSO on every partition), stops everything and writes a JSON report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from dgm.config.external_sinks import ExternalSink
from dgm.config.pipelines import PipelineConfig
from dgm.util.errors import UserFacingError
from dgm.util.waiting import wait_until
from embedded_kafka.cluster import EmbeddedCluster
from lab import runner
from lab.faults import FAULT_KINDS, FaultDone, FaultKind, do_fault, drop_acks
from lab.offsets import group_offsets, source_lso
from lab.pipeline import (
    DECLARED,
    PipelineNames,
    add_to_config,
    create_topics,
    has_sink_topic,
    kill_aim,
    pipeline_config,
    processor_settings,
    producer_settings,
    say_on_stderr,
)
from lab.processors.postgres_sink import stored_offsets as postgres_offsets
from lab.processors.settings import MODES, POSTGRES_MODES, Mode, ProcessorSettings
from lab.processors.sqlite_sink import stored_offsets
from lab.producer import ProducerResult, ProducerSettings, run_producer
from lab.proxy import FaultProxy
from lab.supervisor import KILL_AIMS, KillAim, Supervisor

# Re-exported: callers import these from here.

PROGRESS_EVERY = 5.0  # seconds between progress lines
Progress = Callable[[str], None]


class LabError(UserFacingError):
    pass


@dataclass(frozen=True)
class LabSettings:
    pipeline: str
    mode: Mode
    bootstrap_servers: str
    lab_dir: Path  # each run gets its own folder inside: ledger, logs, sink store, report
    messages: int = 1000
    crashes: int = 0  # SIGKILLs of the processor
    rate: float | None = 200.0  # source messages/s; None = as fast as possible
    faults: tuple[FaultKind, ...] = ()  # kill (= 3 crashes unless set), rebalance, ...
    kill_at: KillAim | None = None  # None: the mode's telling spot (DEFAULT_AIM)
    partitions: int = 3
    replication_factor: int = -1
    abort_every: int | None = None  # None: DEFAULT_ABORT_EVERY for transactional modes
    producer_idempotence: bool = True
    # The source producer's max.in.flight.requests.per.connection (None: librdkafka's default);
    # idempotence off, several in flight and drop-acks make its records out of order.
    producer_max_in_flight: int | None = None
    drop_probability: float = 0.2  # of a Produce response, with drop-acks
    batch_size: int = 20
    step_delay: float = 0.15
    catch_up_timeout: float = 120.0
    seed: int | None = None
    cluster: EmbeddedCluster | None = field(default=None, compare=False)  # for broker faults
    config_path: Path | None = None  # the pipeline is appended to this dgm.toml
    report_path: Path | None = None  # default: <run folder>/report.json
    client: dict[str, str] = field(default_factory=dict, repr=False)  # may hold secrets
    # libpq connection string of the database the postgres-* modes write to.
    sink_dsn: str = field(default="", repr=False)  # may hold a password
    progress: Progress | None = field(default=None, compare=False)

    @property
    def planned_crashes(self) -> int:
        return self.crashes or (3 if "kill" in self.faults else 0)

    def problems(self) -> list[str]:
        found = [
            message
            for broken, message in (
                (self.mode not in MODES, f"--mode: expected one of {', '.join(MODES)}"),
                (self.messages < 1, f"--messages: expected >= 1, got {self.messages}"),
                (self.crashes < 0, f"--crashes: expected >= 0, got {self.crashes}"),
                (self.rate is not None and self.rate <= 0, "--rate: expected > 0"),
                (self.kill_at is not None and self.kill_at not in KILL_AIMS, "--kill-at"),
                (not 0 <= self.drop_probability <= 1, "drop probability: expected 0..1"),
                (self.partitions < 1, "partitions: expected >= 1"),
                (
                    self.producer_max_in_flight is not None and self.producer_max_in_flight < 1,
                    f"--producer-max-in-flight: expected >= 1, got {self.producer_max_in_flight}",
                ),
                (
                    self.mode in POSTGRES_MODES and not self.sink_dsn,
                    f"{self.mode} needs a PostgreSQL connection string (sink_dsn)",
                ),
            )
            if broken
        ]
        found += [f"--fault: unknown {f!r}" for f in self.faults if f not in FAULT_KINDS]
        needs_cluster = {"broker-restart", "drop-acks"} & set(self.faults)
        if needs_cluster and self.cluster is None:
            found.append(
                f"--fault {'/'.join(sorted(needs_cluster))} needs dgm's embedded cluster "
                "(its broker processes and FAULT listeners); drop --bootstrap"
            )
        if "broker-restart" in self.faults and self.cluster and self.cluster.brokers < 3:
            found.append(
                "--fault broker-restart needs a 3-broker cluster (dgm broker start --brokers 3)"
            )
        return found


@dataclass(frozen=True)
class LabReport:
    pipeline: str
    mode: str
    declared_semantic: str
    bootstrap_servers: str
    source_topic: str
    sink_topic: str | None
    external_sink: dict[str, Any] | None
    consumer_group: str
    messages: dict[str, int]  # requested, sent, acked, failed, aborted
    producer_session: str
    ledger_path: str
    crashes: list[dict[str, Any]]
    faults: list[dict[str, Any]]
    processor_exits: list[dict[str, Any]]
    caught_up: bool
    started_at: float
    finished_at: float
    run_dir: str
    config_path: str | None  # the dgm.toml the pipeline was added to
    config_error: str | None  # why it could not be added (e.g. a read-only file)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)


def fault_plan(crashes: int, faults: tuple[str, ...]) -> list[tuple[float, str]]:
    """(fraction of the messages sent, fault) for every crash, rebalance and broker restart,
    spread evenly over the production and never all at its very end."""
    kinds = ["kill"] * crashes + [f for f in faults if f in ("rebalance", "broker-restart")]
    # Interleave so a crash does not always precede a rebalance: sort by position of each kind.
    ordered = sorted(enumerate(kinds), key=lambda item: (item[0] % max(1, crashes), item[0]))
    return [((i + 1) / (len(kinds) + 1), kind) for i, (_, kind) in enumerate(ordered)]


def run_lab(settings: LabSettings) -> LabReport:
    problems = settings.problems()
    if problems:
        raise LabError("; ".join(problems))
    say = settings.progress or say_on_stderr
    names = PipelineNames.derive(settings.pipeline)
    run_dir = settings.lab_dir / names.group
    pipeline = pipeline_config(settings.pipeline, settings.mode, names, run_dir, settings.sink_dsn)
    bad = list(pipeline.problems())
    if bad:
        raise LabError("; ".join(f"pipeline {key or 'name'}: {why}" for key, why in bad))
    run_dir.mkdir(parents=True, exist_ok=True)
    started_at = time.time()
    admin = AdminClient({"bootstrap.servers": settings.bootstrap_servers, **settings.client})
    create_topics(admin, settings.mode, names, settings.partitions, settings.replication_factor)
    say(f"lab {settings.pipeline}: {settings.mode}, source {names.source}, group {names.group}")

    supervisor = Supervisor(
        settings.mode,
        _processor_settings(settings, names, run_dir),
        run_dir / "logs",
        kill_aim(settings.mode, settings.kill_at),
        settings.seed,
        say,
    )
    stop_producer = threading.Event()
    faults: list[FaultDone] = []
    # The pool is left last: cleanup has stopped the producer by then, so its wait is short.
    with ThreadPoolExecutor(1) as pool, contextlib.ExitStack() as cleanup:
        cleanup.callback(stop_producer.set)
        proxies = _drop_acks(settings, cleanup)
        supervisor.start()
        cleanup.callback(supervisor.stop)
        wait_until(supervisor.main.ready.is_set, 120, "the processor to start")
        producer_settings = _producer_settings(settings, names, run_dir, bool(proxies))
        producing_since = time.time()
        produced = pool.submit(run_producer, producer_settings, stop_producer)
        for fraction, kind in fault_plan(settings.planned_crashes, settings.faults):
            runner.wait_for_share(producer_settings, fraction, produced.done)
            say(f"{fraction:.0%} of the messages sent: {kind}")
            faults += do_fault(kind, supervisor, admin, names.source, settings.cluster, say)
        while not wait_futures([produced], timeout=PROGRESS_EVERY).done:
            say(f"sent {runner.sent(producer_settings)}/{settings.messages} messages")
        result: ProducerResult = produced.result()
        say(f"producer done: {result.sent} sent, {result.acked} acked, {result.aborted} aborted")
        if proxies:
            dropped = sum(proxy.dropped for proxy in proxies)
            detail = {"probability": settings.drop_probability, "dropped_responses": dropped}
            faults.insert(0, FaultDone("drop-acks", producing_since, time.time(), detail))
        caught_up = _catch_up(settings, admin, names, pipeline, say)
        if not caught_up:
            _tell_processor_logs(run_dir / "logs", say)
    config_error = add_to_config(settings.config_path, pipeline, say)
    report = LabReport(
        pipeline=settings.pipeline,
        mode=settings.mode,
        declared_semantic=DECLARED[settings.mode],
        bootstrap_servers=settings.bootstrap_servers,
        source_topic=names.source,
        sink_topic=names.sink if has_sink_topic(settings.mode) else None,
        external_sink=_external_sink_json(pipeline.external_sink),
        consumer_group=names.group,
        **runner.produced(result, producer_settings),
        crashes=[dataclasses.asdict(c) for c in supervisor.crashes],
        faults=[dataclasses.asdict(f) for f in faults],
        processor_exits=[dataclasses.asdict(e) for e in supervisor.exits],
        caught_up=caught_up,
        **runner.timing(started_at, run_dir),
        config_path=str(settings.config_path) if settings.config_path else None,
        config_error=config_error,
    )
    _write_atomically(settings.report_path or run_dir / "report.json", report.to_json())
    return report


def _processor_settings(
    settings: LabSettings, names: PipelineNames, run_dir: Path
) -> ProcessorSettings:
    return processor_settings(
        settings.mode,
        settings.bootstrap_servers,
        names,
        run_dir,
        batch_size=settings.batch_size,
        step_delay=settings.step_delay,
        client=settings.client,
        sink_dsn=settings.sink_dsn,
    )


def _producer_settings(
    settings: LabSettings, names: PipelineNames, run_dir: Path, through_proxy: bool
) -> ProducerSettings:
    assert settings.cluster is not None or not through_proxy
    return producer_settings(
        settings.mode,
        (
            settings.cluster.fault_bootstrap_servers
            if through_proxy and settings.cluster
            else settings.bootstrap_servers
        ),
        names,
        run_dir,
        messages=settings.messages,
        rate=settings.rate,
        idempotence=settings.producer_idempotence,
        abort_every=settings.abort_every,
        client=settings.client,
        max_in_flight=settings.producer_max_in_flight,
    )


def _drop_acks(settings: LabSettings, cleanup: contextlib.ExitStack) -> list[FaultProxy]:
    """Proxies in front of every broker that drop Produce responses while the producer runs
    (it alone bootstraps through them)."""
    if "drop-acks" not in settings.faults or settings.cluster is None:
        return []
    return drop_acks(settings.cluster, settings.drop_probability, cleanup)


def _catch_up(
    settings: LabSettings,
    admin: AdminClient,
    names: PipelineNames,
    pipeline: PipelineConfig,
    say: Progress,
) -> bool:
    def done() -> dict[int, int]:
        sink = pipeline.external_sink
        if sink is not None and settings.mode == "postgres-exactly-once":
            return postgres_offsets(settings.sink_dsn, sink.table, names.source)
        if sink is not None and sink.path is not None:
            return stored_offsets(sink.path, sink.table, names.source)
        return group_offsets(admin, names.group, names.source, settings.partitions)

    last_said = [time.monotonic()]

    def behind() -> int:
        lso, reached = source_lso(admin, names.source, settings.partitions), done()
        lag = sum(max(0, end - reached.get(p, 0)) for p, end in lso.items())
        if lag and time.monotonic() - last_said[0] > PROGRESS_EVERY:
            say(f"catching up: {lag} offsets behind the source's LSO")
            last_said[0] = time.monotonic()
        return lag

    try:
        wait_until(lambda: behind() == 0, settings.catch_up_timeout, "the processor to catch up")
    except AssertionError as error:
        say(f"not caught up: {error}")
        return False
    say("processor caught up with the source")
    return True


def _tell_processor_logs(log_dir: Path, say: Progress, lines: int = 10) -> None:
    """Why a processor fell behind is in its own log: show the newest one's tail."""
    logs = sorted(log_dir.glob("*.log"), key=lambda path: path.stat().st_mtime)
    if not logs:
        return
    tail = logs[-1].read_text(errors="replace").splitlines()[-lines:]
    say(f"the newest processor log, {logs[-1]}, ends with:")
    for line in tail:
        say(f"  {line}")


def _external_sink_json(sink: ExternalSink | None) -> dict[str, Any] | None:
    if sink is None:
        return None
    shown = {**dataclasses.asdict(sink), "path": None if sink.path is None else str(sink.path)}
    return {**shown, "password": "***"} if sink.password else shown


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text + "\n")
    os.replace(temporary, path)
