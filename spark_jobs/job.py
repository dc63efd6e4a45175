"""One analysis run (audit, compact, analyze, publish, then merge small batches) and the loop
that repeats it.

The SparkSession is built once and kept across runs (starting Spark costs seconds; a run on
a quiet cluster costs less). A run that fails because the cluster went away is retried with
backoff; a run interrupted half-way publishes nothing, and the next one redoes its work from
the fingerprint batches that were committed (see audit/store.py).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from dgm.config.document import DgmConfig
from dgm.contracts.samples import SampleStore
from dgm.util.errors import UserFacingError
from dgm.util.waiting import next_delay

if TYPE_CHECKING:  # imported where used: Spark's modules load only once a run starts
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from spark_jobs.analyze.copy_batches import CopyBatches
    from spark_jobs.analyze.engine import Engine
    from spark_jobs.analyze.samples import SampleReader
    from spark_jobs.audit.incremental_load import KeptFingerprints

log = logging.getLogger("dgm.analyze")
Progress = Callable[[str], None]
# What runs after each publication (reads what readers read); returns lines to report.
AfterPublish = Callable[[], Sequence[str]]
T = TypeVar("T")

FIRST_RETRY_S = 2.0
MAX_RETRY_S = 60.0


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    records_audited: int
    fingerprints: int
    seconds: float
    stages: dict[str, float]

    def line(self) -> str:
        stages = " ".join(f"{name} {s:.1f}s" for name, s in self.stages.items())
        return (
            f"analysis {self.run_id}: {self.records_audited} records audited, "
            f"{self.fingerprints} fingerprints analyzed, published in {self.seconds:.1f}s "
            f"({stages})"
        )


class AnalysisJob:
    def __init__(
        self,
        config: DgmConfig,
        bootstrap_servers: str,
        master: str | None = None,
        progress: Progress = print,
        spark: SparkSession | None = None,
        after_publish: AfterPublish | None = None,
    ) -> None:
        self.config = config
        self.bootstrap_servers = bootstrap_servers
        self.master = master or config.analysis.spark_master
        self.progress = progress
        # A session handed in (tests, a notebook) belongs to the caller: close() leaves it be.
        self._spark = spark
        self._owns_spark = spark is None
        # Runs after each publication, outside Spark (the shell wires the alert evaluation
        # in); it reports its own failures as lines and must not raise.
        self.after_publish = after_publish
        # Built by the first run, kept across runs:
        self._samples: SampleReader | None = None  # each cycle reads only new sample files
        self._kept: KeptFingerprints | None = None  # each cycle reads only new batches
        self._engine: Engine | None = None  # each cycle recomputes what new records touch
        self._copy_batches: CopyBatches | None = None  # each duplicate copy's batch read once

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from spark_jobs.audit.external_jdbc import driver_packages
            from spark_jobs.session import build_session, running_session

            # One SparkContext a process: a job that finds one running does not own it.
            self._owns_spark = running_session() is None
            began = time.monotonic()
            self.progress(f"analyze: starting Spark ({self.master})")
            self._spark = build_session(
                master=self.master,
                app_name="dgm-analyze",
                packages=driver_packages(self.config.pipelines),
            )
            self.progress(f"analyze: Spark ready in {time.monotonic() - began:.1f}s")
        return self._spark

    def _batch_reader(self) -> Callable[[pa.Table], pa.Table]:
        """Reads the batch headers of duplicate copies from each copy's cluster."""
        from spark_jobs.audit.cluster_sources import kafka_sources
        from spark_jobs.audit.copy_producers import producers_of

        sources = kafka_sources(self.config, self.bootstrap_servers)
        return lambda coordinates: producers_of(sources, coordinates)

    def run_once(self, now: datetime | None = None) -> RunSummary:
        from spark_jobs.analyze.copy_batches import CopyBatches
        from spark_jobs.analyze.engine import Engine
        from spark_jobs.analyze.samples import SampleReader
        from spark_jobs.audit.incremental_load import KeptFingerprints

        spark = self.spark
        if self._kept is None:
            self._kept = KeptFingerprints(spark, self.config.state_dir)
        if self._engine is None:
            self._engine = Engine()
        if self._samples is None:
            self._samples = SampleReader(self.config.state_dir)
        if self._copy_batches is None:
            self._copy_batches = CopyBatches(self._batch_reader())
        try:
            return self._run(spark, now, self._kept, self._engine, self._samples)
        except BaseException:
            # A kept frame may be what failed (its executor gone, its files merged away);
            # the next run rebuilds from the store.
            self._kept.reset()
            self._engine.reset()
            raise

    def _run(
        self,
        spark: SparkSession,
        now: datetime | None,
        kept: KeptFingerprints,
        engine: Engine,
        sample_reader: SampleReader,
    ) -> RunSummary:
        from spark_jobs.analyze.analysis import analyze
        from spark_jobs.analyze.claims import held_lines, sinks_read_to
        from spark_jobs.analyze.publish import publish
        from spark_jobs.analyze.runs import fill_run
        from spark_jobs.audit.audit import audit, reread_share
        from spark_jobs.audit.merge import merge_small_batches
        from spark_jobs.audit.rewrite import compact
        from spark_jobs.audit.store import FingerprintStore

        config, state_dir = self.config, self.config.state_dir
        run_id = uuid.uuid4().hex[:12]
        started_at = datetime.now(UTC)
        began = time.monotonic()
        stages: dict[str, float] = {}

        def stage(name: str, work: Callable[[], T]) -> T:
            self.progress(f"analyze: {name}…")
            mark = time.monotonic()
            result = work()
            stages[name] = time.monotonic() - mark
            return result

        # Losses are judged as of the newest sample the audit bounds itself by, not as of
        # now: group commits sampled during a long audit may cover sink copies it never read.
        audit_horizon = SampleStore(state_dir).newest_time("offsets")
        audited = stage(
            "audit", lambda: audit(spark, config, self.bootstrap_servers, self.progress)
        )
        retention = timedelta(hours=config.analysis.retention_h)
        stage("compact", lambda: compact(FingerprintStore(state_dir), spark, retention))
        # The fingerprints stay in the executors from run to run; only new batches are read.
        fingerprints = stage("load", kept.load)
        counted = fingerprints.counted()
        self.progress(
            f"analyze: {counted} fingerprints, {kept.batches_read} batches read from disk"
        )
        samples = stage("samples", sample_reader.read_all)
        analyzed_at = now or datetime.now(UTC)
        if audit_horizon is not None:
            analyzed_at = min(analyzed_at, audit_horizon)
        read_to = sinks_read_to(config, audited.last_sampled)
        for line in held_lines(read_to, audited.last_sampled, config):
            self.progress(line)
        # Only what the new fingerprints touch is recomputed (the Engine of analyze/engine.py).
        tables = stage(
            "analyze",
            lambda: analyze(
                spark, config, fingerprints, samples, analyzed_at, engine, self._copy_batches,
                read_to,
            ),
        )  # fmt: skip
        self.progress(f"analyze: {engine.last}")
        audited_records = sum(audited.records.values())
        tables["runs"] = fill_run(
            tables["runs"], run_id, started_at, datetime.now(UTC), audited_records
        )
        stage("publish", lambda: publish(tables, state_dir))
        if self.after_publish is not None:
            for line in stage("after publish", self.after_publish):
                self.progress(line)
        # After publishing, off the path from a record to the dashboard: the merged batch
        # holds the same rows, which the next run reads from fewer files.
        # Also after publishing: the share of audited offsets read again (a truncation it
        # finds is published by the next cycle; one after a backwards move, by this one).
        stage(
            "re-read",
            lambda: reread_share(
                spark, config, self.bootstrap_servers, audited.new_offsets, self.progress
            ),
        )
        stage("merge", lambda: merge_small_batches(spark, state_dir))
        summary = RunSummary(run_id, audited_records, counted, time.monotonic() - began, stages)
        self.progress(summary.line())
        return summary

    def run_forever(self, stop: threading.Event) -> None:
        """A run every interval until `stop`; failures retried with capped backoff, each
        failure logged once with its reason (the loop itself never dies of one)."""
        delay: float | None = None
        while not stop.is_set():
            began = time.monotonic()
            try:
                self.run_once()
                delay = None
                wait = max(0.0, self.config.analysis.interval_s - (time.monotonic() - began))
            except UserFacingError as error:
                delay = next_delay(delay, FIRST_RETRY_S, MAX_RETRY_S)
                self.progress(f"analyze: run failed: {error}; retrying in {delay:.0f}s")
                wait = delay
            except Exception as error:  # Spark and Kafka errors: keep the service alive
                delay = next_delay(delay, FIRST_RETRY_S, MAX_RETRY_S)
                log.warning("analysis run failed: %s; retrying in %.0fs", error, delay)
                log.debug("analysis run failure", exc_info=True)
                wait = delay
            stop.wait(wait)

    def close(self) -> None:
        if self._kept is not None:
            self._kept.reset()
            self._kept = None
        if self._spark is not None and self._owns_spark:
            self._spark.stop()
        self._spark = None
