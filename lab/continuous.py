"""The continuous lab: every lab pipeline running at once, for as long as it is let run, with
faults on a schedule. What `dgm demo` and `dgm lab demo` show on the dashboard.

`setup()` creates each pipeline's topics (once; existing ones are kept) and adds the pipeline
to dgm.toml, so that the collectors and the analysis monitor it from their first cycle. Then
`start()` runs, per pipeline, the supervised processor, the stamped producer at a modest rate
and a fault thread: every `fault_every` seconds (drawn from the range) a SIGKILL aimed as
`run_lab` aims it, every `rebalance_every`-th time a rebalance instead; on a 3-broker embedded
cluster one broker restart every `broker_restart_every` seconds. The drop-acks pipeline feeds
an at-least-once processor from a producer with idempotence off and 5 requests in flight
through the fault proxies: its source gets producer-retry duplicates, out of order. `stop()`
ends it all; nothing is left running.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from dgm.config.pipelines import PipelineConfig
from dgm.util.errors import UserFacingError
from dgm.util.waiting import next_delay, wait_until
from embedded_kafka.cluster import EmbeddedCluster
from lab.faults import FaultDone, do_fault, drop_acks
from lab.pipeline import (
    PipelineNames,
    Progress,
    add_to_config,
    has_sink_topic,
    kill_aim,
    pipeline_config,
    processor_settings,
    producer_settings,
    say_on_stderr,
)
from lab.processors.settings import Mode
from lab.producer import ProducerSettings, run_producer
from lab.supervisor import Supervisor
from lab.topics import create_topic

ENDLESS = 10**12  # the producer's message count: it runs until stopped
DROP_ACKS_IN_FLIGHT = 5  # the drop-acks producer's max.in.flight.requests.per.connection


@dataclass(frozen=True)
class DemoPipeline:
    name: str
    mode: Mode
    # The producer goes through the fault proxies (Produce responses dropped) with
    # idempotence off and 5 requests in flight: its retries duplicate the source and land
    # after later records (out of order). Needs the embedded cluster.
    drop_acks: bool = False
    faults: bool = True  # crashes and rebalances on the schedule


DEMO_PIPELINES: tuple[DemoPipeline, ...] = (
    DemoPipeline("demo-at-most-once", "at-most-once"),
    DemoPipeline("demo-at-least-once", "at-least-once"),
    DemoPipeline("demo-exactly-once", "exactly-once"),
    DemoPipeline("demo-exactly-once-broken", "exactly-once-broken"),
    DemoPipeline("demo-idempotent-sink", "idempotent-sink"),
    DemoPipeline("demo-drop-acks", "at-least-once", drop_acks=True, faults=False),
)


class ContinuousLabError(UserFacingError):
    pass


@dataclass(frozen=True)
class ContinuousSettings:
    bootstrap_servers: str
    lab_dir: Path  # <lab_dir>/<pipeline>/: ledger, processor logs, SQLite sink
    pipelines: tuple[DemoPipeline, ...] = DEMO_PIPELINES
    rate: float = 5.0  # source messages/s per pipeline
    fault_every: tuple[float, float] = (30.0, 60.0)  # seconds between faults, drawn uniformly
    first_fault_after: tuple[float, float] = (10.0, 25.0)
    rebalance_every: int = 4  # every k-th fault of a pipeline is a rebalance, not a crash
    broker_restart_every: float = 180.0  # 3-broker embedded cluster only
    partitions: int = 3
    replication_factor: int = -1
    drop_probability: float = 0.2
    cluster: EmbeddedCluster | None = field(default=None, compare=False)
    config_path: Path | None = None  # where the pipelines are added
    client: dict[str, str] = field(default_factory=dict, repr=False)
    seed: int | None = None
    progress: Progress | None = field(default=None, compare=False)

    def problems(self) -> list[str]:
        found = []
        if self.rate <= 0:
            found.append(f"--rate: expected > 0, got {self.rate}")
        low, high = self.fault_every
        if not 0 < low <= high:
            found.append(f"fault interval: expected 0 < low <= high, got {self.fault_every}")
        if any(p.drop_acks for p in self.pipelines) and self.cluster is None:
            found.append("a drop-acks pipeline needs dgm's embedded cluster (its FAULT listener)")
        return found


@dataclass(eq=False)
class _Running:
    pipeline: DemoPipeline
    names: PipelineNames
    run_dir: Path
    config: PipelineConfig
    supervisor: Supervisor | None = None
    threads: list[threading.Thread] = field(default_factory=list)
    faults: list[FaultDone] = field(default_factory=list)


class ContinuousLab:
    def __init__(self, settings: ContinuousSettings) -> None:
        problems = settings.problems()
        if problems:
            raise ContinuousLabError("; ".join(problems))
        self.settings = settings
        self.say = settings.progress or say_on_stderr
        self.stop_event = threading.Event()
        # Set by quiesce() and stop(): producers and fault schedules end, processors go on.
        self.quiet = threading.Event()
        self._random = random.Random(settings.seed)
        # Its failures raise; its log would only repeat them (and outlive a stopped broker).
        self._admin = AdminClient(
            {"bootstrap.servers": settings.bootstrap_servers, "log_level": "0", **settings.client}
        )
        self._cleanup = contextlib.ExitStack()
        self._running: list[_Running] = []
        self._threads: list[threading.Thread] = []
        self._started = False

    @property
    def pipelines(self) -> list[PipelineConfig]:
        return [r.config for r in self._running]

    def faults(self) -> dict[str, list[FaultDone]]:
        return {r.pipeline.name: list(r.faults) for r in self._running}

    def setup(self) -> list[PipelineConfig]:
        """Topics (kept if they exist) and dgm.toml entries of every pipeline."""
        s = self.settings
        for pipeline in s.pipelines:
            names = PipelineNames.fixed(pipeline.name)
            run_dir = (s.lab_dir / pipeline.name).absolute()
            run_dir.mkdir(parents=True, exist_ok=True)
            topics = [names.source] + ([names.sink] if has_sink_topic(pipeline.mode) else [])
            for topic in topics:
                self._ensure_topic(topic)
            config = pipeline_config(pipeline.name, pipeline.mode, names, run_dir)
            add_to_config(s.config_path, config, self.say)
            self._running.append(_Running(pipeline, names, run_dir, config))
        return self.pipelines

    def start(self) -> None:
        """Processors, producers and fault schedules of every pipeline, in threads."""
        if not self._running:
            self.setup()
        self._started = True
        s = self.settings
        if any(p.drop_acks for p in s.pipelines) and s.cluster is not None:
            drop_acks(s.cluster, s.drop_probability, self._cleanup)
        for running in self._running:
            self._spawn(f"{running.pipeline.name}", self._run_pipeline, running)
        if s.cluster is not None and s.cluster.brokers >= 3 and self._running:
            self._spawn("broker-restarts", self._restart_brokers)

    def quiesce(self) -> None:
        """Stop producing and faulting; the processors keep going until `stop()`, so they can
        catch up with their sources."""
        self.quiet.set()

    def stop(self, timeout: float = 60.0) -> None:
        """Stop producers, processors, fault threads and proxies; idempotent."""
        self.quiet.set()
        self.stop_event.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        for running in self._running:
            if running.supervisor is not None:
                running.supervisor.stop()  # again: a visitor spawned late is stopped too
        self._cleanup.close()
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            self.say(f"lab: threads still running after stop: {alive}")

    def __enter__(self) -> ContinuousLab:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait(self) -> None:
        self.stop_event.wait()

    # -- internals -----------------------------------------------------------------------

    def _spawn(self, name: str, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _ensure_topic(self, topic: str) -> None:
        existing = self._admin.list_topics(timeout=30).topics
        if topic in existing:
            return
        create_topic(self._admin, topic, self.settings.partitions, self.settings.replication_factor)

    def _run_pipeline(self, running: _Running) -> None:
        s, p = self.settings, running.pipeline
        say = self._prefixed(p.name)
        supervisor = Supervisor(
            p.mode,
            processor_settings(
                p.mode,
                s.bootstrap_servers,
                running.names,
                running.run_dir,
                batch_size=20,
                step_delay=0.15,
                client=s.client,
            ),
            running.run_dir / "logs",
            kill_aim(p.mode),
            None if s.seed is None else s.seed + len(p.name),
            say,
        )
        running.supervisor = supervisor
        supervisor.start()
        try:
            wait_until(
                lambda: supervisor.main.ready.is_set() or self.stop_event.is_set(),
                120,
                f"the {p.name} processor to start",
            )
        except AssertionError as error:
            say(f"{error}; going on (the supervisor keeps restarting it)")
        bootstrap = s.bootstrap_servers
        if p.drop_acks and s.cluster is not None:
            bootstrap = s.cluster.fault_bootstrap_servers
        producer = producer_settings(
            p.mode,
            bootstrap,
            running.names,
            running.run_dir,
            messages=ENDLESS,
            rate=s.rate,
            idempotence=not p.drop_acks,
            abort_every=None,
            # Several requests in flight: a retried one lands after later ones (out of order).
            max_in_flight=DROP_ACKS_IN_FLIGHT if p.drop_acks else None,
            # In-process: librdkafka's reconnect notices (the proxy closes a connection per
            # dropped ack) would flood the terminal; errors still show.
            client={"log_level": "3", **s.client},
        )
        self._spawn(f"{p.name}-producer", self._produce, producer, say)
        say(f"{p.mode}: source {running.names.source}, {s.rate:g} msg/s")
        if p.faults:
            self._faults(running, supervisor, say)
        self.stop_event.wait()
        supervisor.stop()

    def _produce(self, settings: ProducerSettings, say: Progress) -> None:
        """The producer until stopped; restarted (a new session) if it fails."""
        delay: float | None = None
        while not self.quiet.is_set():
            began = time.monotonic()
            try:
                run_producer(settings, self.quiet)
            except Exception as error:  # a broker away too long, a fenced producer
                if time.monotonic() - began > 60:
                    delay = None
                delay = next_delay(delay, 1.0, 30.0)
                say(f"producer failed ({error}); restarting in {delay:.0f}s")
                self.quiet.wait(delay)

    def _faults(self, running: _Running, supervisor: Supervisor, say: Progress) -> None:
        s = self.settings
        count = 0
        wait = self._random.uniform(*s.first_fault_after)
        while not self.quiet.wait(wait):
            count += 1
            kind = "rebalance" if count % s.rebalance_every == 0 else "kill"
            try:
                running.faults += do_fault(
                    kind, supervisor, self._admin, running.names.source, s.cluster, say, 10.0
                )
            except Exception as error:  # a fault that fails is reported, the lab goes on
                say(f"{kind} failed: {error}")
            wait = self._random.uniform(*s.fault_every)

    def _restart_brokers(self) -> None:
        s = self.settings
        say = self._prefixed("lab")
        while not self.quiet.wait(s.broker_restart_every):
            running = self._random.choice(self._running)
            if running.supervisor is None:
                continue
            try:
                running.faults += do_fault(
                    "broker-restart",
                    running.supervisor,
                    self._admin,
                    running.names.source,
                    s.cluster,
                    say,
                )
            except Exception as error:
                say(f"broker restart failed: {error}")

    def _prefixed(self, name: str) -> Progress:
        return lambda line: self.say(f"{name}: {line}")
