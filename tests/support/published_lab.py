"""A real lab run, collected and analyzed once per test session: the DuckDB file that the
analysis end-to-end tests check against the truth and the dashboard tests display.

Every pipeline mode runs on the session's real broker through SIGKILLs, with the collectors
sampling every second meanwhile (so their events are the faults the verdicts weigh); a sixth
run sends its source through the fault proxy with idempotence off, so that dropped acks make
the producer really retry (`run_every_mode`). Then one `dgm analyze` run audits and publishes
everything (`publish_lab`). The runs themselves are a session fixture of their own
(`lab_runs`): the lab's own tests check each mode's delivery on them, without Spark.

The lab's PostgreSQL modes run the same way, once per session (`run_postgres_modes`), for
the lab's tests of those modes and the tests of their verdicts.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from collectors.clients import Clients
from collectors.cycle import Collector
from collectors.runner import Runner
from dgm.config.document import DgmConfig
from dgm.config.loader import load_config
from dgm.contracts.published import PUBLISHED_FILE
from dgm.contracts.samples import SampleStore
from lab.run import LabReport, LabSettings, run_lab
from spark_jobs.job import AnalysisJob

MESSAGES = 600
RATE = 60.0  # ~10 s of production per run: crashes land while the processor has work
CRASHES = 3
# mode -> extra LabSettings; "drop-acks" is an at-least-once pipeline fed by a producer whose
# acks the fault proxy drops, with idempotence off and 5 requests in flight (its retries
# duplicate and reorder its records); "drop-acks-idempotent" the same producer with
# idempotence on (neither), a short run.
DROP_ACKS_RUNS = ("drop-acks", "drop-acks-idempotent")
RUNS: dict[str, dict[str, Any]] = {
    "at-most-once": {"crashes": CRASHES},
    "at-least-once": {"crashes": CRASHES},
    "exactly-once": {"crashes": CRASHES},
    "exactly-once-broken": {},
    "idempotent-sink": {"crashes": CRASHES},
    "drop-acks": {
        "faults": ("drop-acks",),
        "producer_idempotence": False,
        "producer_max_in_flight": 5,
    },
    "drop-acks-idempotent": {
        "faults": ("drop-acks",),
        "producer_max_in_flight": 5,
        "messages": 300,
        "rate": 100.0,
    },
}

# What `dgm analyze` must publish for the crashed runs: (achieved, meets_declared).
EXPECTED_VERDICT = {
    "at-most-once": ("at-most-once", True),
    "at-least-once": ("at-least-once", True),
    "exactly-once": ("exactly-once", True),
    "exactly-once-broken": ("no guarantee", False),
    "idempotent-sink": ("exactly-once", True),
}
# What each lab run's card must say (its verdict is checked against the truth elsewhere).
BADGES = {
    "at-most-once": ("green", "MEETS"),
    "at-least-once": ("green", "MEETS"),
    "exactly-once": ("green", "MEETS"),
    "exactly-once-broken": ("red", "VIOLATES"),
    "idempotent-sink": ("green", "MEETS"),
    "drop-acks": ("green", "MEETS"),
    "drop-acks-idempotent": ("green", "MEETS"),
}


# The lab's PostgreSQL sink modes, run the same way into the session's PostgreSQL server.
POSTGRES_MODES = ("postgres-exactly-once", "postgres-at-least-once")


@dataclass(frozen=True)
class LabRuns:
    """Lab runs done with the collectors sampling them (into `state_dir`, the pipelines
    appended to `config_path`), not analyzed yet."""

    state_dir: Path
    config_path: Path
    reports: dict[str, LabReport]  # by RUNS (or POSTGRES_MODES) key


@dataclass(frozen=True)
class PublishedLab:
    state_dir: Path
    config: DgmConfig
    reports: dict[str, LabReport]  # by RUNS key

    @property
    def database(self) -> Path:
        return self.state_dir / PUBLISHED_FILE

    def pipeline(self, run: str) -> str:
        return self.reports[run].pipeline


@contextmanager
def collecting(bootstrap_servers: str, config: DgmConfig, interval_s: float) -> Iterator[None]:
    """The real collector loop in a thread for the duration of the block."""
    clients = Clients({"bootstrap.servers": bootstrap_servers}, 10.0)
    collector = Collector(clients, config.collectors, SampleStore(config.state_dir), 10.0)
    stop = threading.Event()
    runner = Runner(collector, interval_s, stop, 30.0, lambda line: None)
    thread = threading.Thread(target=runner.run_forever, name="collector", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(60)
        clients.close()
        assert not thread.is_alive(), "the collector did not stop"


def lab_run(
    kafka: Any, root: Path, config_path: Path, name: str, mode: str, **extra: Any
) -> LabReport:
    """A lab run `lab-<name>` of `mode` (LabSettings `extra` beside MESSAGES at RATE),
    appended to `config_path`; it must have caught up and been added."""
    settings = LabSettings(
        pipeline=f"lab-{name}",
        mode=mode,  # type: ignore[arg-type]
        bootstrap_servers=kafka.bootstrap_servers,
        lab_dir=root / "lab",
        cluster=kafka.embedded,
        config_path=config_path,
        progress=lambda line: None,
        **{"messages": MESSAGES, "rate": RATE, **extra},
    )
    report = run_lab(settings)
    assert report.caught_up, f"{name}: the processor never caught up"
    assert report.config_error is None, report.config_error
    return report


def lab_config(root: Path) -> tuple[Path, Path]:
    """(state dir, dgm.toml) of lab runs under `root`: the lab appends its pipelines."""
    state_dir = root / "state"
    config_path = root / "dgm.toml"
    config_path.write_text(f'state_dir = "{state_dir}"\n\n[analysis]\ngrace_s = 0\nwindow_s = 60\n')
    return state_dir, config_path


def run_every_mode(kafka: Any, root: Path) -> LabRuns:
    """Every RUNS run on `kafka`, side by side, with the collectors sampling every second
    until a full cycle after the last commit."""
    state_dir, config_path = lab_config(root)

    def run(name: str) -> LabReport:
        mode = "at-least-once" if name in DROP_ACKS_RUNS else name
        return lab_run(kafka, root, config_path, name, mode, **RUNS[name])

    def one_after_another(names: list[str]) -> list[LabReport]:
        return [run(name) for name in names]

    # The runs use their own topics and groups, and mostly wait (paced producers, processors
    # restarting after a SIGKILL), so they run side by side. The drop-acks
    # runs share the brokers' fault proxies, so they go one after the other.
    proxied = [r for r in RUNS if r in DROP_ACKS_RUNS and kafka.embedded is not None]
    lanes = [[r] for r in RUNS if r not in DROP_ACKS_RUNS] + ([proxied] if proxied else [])
    with collecting(kafka.bootstrap_servers, load_config(config_path), interval_s=1.0):
        with ThreadPoolExecutor(len(lanes)) as pool:
            ran = [report for reports in pool.map(one_after_another, lanes) for report in reports]
        by_name = dict(zip([name for lane in lanes for name in lane], ran, strict=True))
        reports = {name: by_name[name] for name in RUNS if name in by_name}  # RUNS's order
        # One more full cycle after the last commit, so the samples hold the final offsets.
        collected = offsets_samples(state_dir)
        wait_for_cycles(state_dir, collected + 2)
    return LabRuns(state_dir, config_path, reports)


def run_postgres_modes(kafka: Any, dsn: str, root: Path) -> LabRuns:
    """Each POSTGRES_MODES run on `kafka` into the PostgreSQL server at `dsn` through three
    SIGKILLs while records flow, with the collectors sampling every second meanwhile."""
    state_dir, config_path = lab_config(root)

    def run(mode: str) -> LabReport:
        return lab_run(kafka, root, config_path, mode, mode, crashes=CRASHES, sink_dsn=dsn)

    with collecting(kafka.bootstrap_servers, load_config(config_path), interval_s=1.0):
        with ThreadPoolExecutor(len(POSTGRES_MODES)) as pool:  # own topics, groups and tables
            reports = dict(zip(POSTGRES_MODES, pool.map(run, POSTGRES_MODES), strict=True))
        wait_for_cycles(state_dir, offsets_samples(state_dir) + 2)  # samples hold the final offsets
    return LabRuns(state_dir, config_path, reports)


def publish_lab(runs: LabRuns, kafka: Any, spark: Any) -> PublishedLab:
    """One `dgm analyze` run over `runs`' samples: audited, analyzed and published."""
    config = load_config(runs.config_path)
    job = AnalysisJob(config, kafka.bootstrap_servers, master="local[2]", spark=spark)
    job.progress = lambda line: None
    job.run_once()
    return PublishedLab(runs.state_dir, config, runs.reports)


def wait_for_cycles(state_dir: Path, count: int) -> None:
    """Until the collectors have written `count` offsets samples (one per cycle)."""
    from dgm.util.waiting import wait_until

    wait_until(lambda: offsets_samples(state_dir) >= count, 60, f"{count} collector cycles")


def verdict(lab: PublishedLab, run: str) -> dict[str, Any]:
    """The run's one published verdicts row."""
    with duckdb.connect(str(lab.database), read_only=True) as db:
        cursor = db.execute("SELECT * FROM verdicts WHERE pipeline = ?", [lab.pipeline(run)])
        names = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
    assert len(rows) == 1, f"{run}: {len(rows)} verdict rows"
    return dict(zip(names, rows[0], strict=True))


def offsets_samples(state_dir: Path) -> int:
    """How many offsets samples the collectors have written under `state_dir`."""
    return len(list((state_dir / "samples" / "offsets").glob("*.parquet")))


def pipeline_verdict(state_dir: Path, pipeline: str) -> dict[str, Any]:
    """The pipeline's published verdicts row, with `causes`: its lost rows counted by
    (cause, cluster of the source record)."""
    with duckdb.connect(str(state_dir / PUBLISHED_FILE), read_only=True) as db:
        cursor = db.execute("SELECT * FROM verdicts WHERE pipeline = ?", [pipeline])
        names = [d[0] for d in cursor.description]
        row = cursor.fetchone()
        causes = db.execute(
            "SELECT cause, cluster, count(*) FROM lost WHERE pipeline = ? GROUP BY ALL",
            [pipeline],
        ).fetchall()
    assert row is not None
    return dict(zip(names, row, strict=True)) | {"causes": {(c, k): n for c, k, n in causes}}
