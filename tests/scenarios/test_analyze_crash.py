"""`dgm analyze` SIGKILLed mid-audit and mid-publication, then restarted, publishes the same
tables as a run that was never interrupted (the analysis job on the session's Spark, in a
thread while the killed runs go on), from a copy of the same samples."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import duckdb

from dgm.config.loader import load_config
from dgm.contracts.published import PUBLISHED_FILE, TABLES
from dgm.util.waiting import wait_until
from spark_jobs.job import AnalysisJob
from tests.support.dgm_processes import quick_jvm
from tests.support.small_pipeline import DUPLICATED, collected


def _analyze(config: Path) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "shell.cli", "--config", str(config), "analyze", "--once"]
    env = quick_jvm({**os.environ, "DGM_SPARK_MASTER": "local[1]"})
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )


def _kill_when(config: Path, appears: Any, what: str) -> None:
    """Start `dgm analyze --once` and SIGKILL it the moment `appears()` holds."""
    process = _analyze(config)
    try:
        wait_until(lambda: appears() or process.poll() is not None, 300, what, interval=0.01)
        assert process.poll() is None, f"the run ended before {what}: {process.communicate()[0]}"
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(30) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)


def _complete(config: Path) -> None:
    process = _analyze(config)
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output


def _tables(state_dir: Path) -> dict[str, list[tuple[Any, ...]]]:
    with duckdb.connect(str(state_dir / PUBLISHED_FILE), read_only=True) as db:
        return {
            table.name: sorted(db.execute(f'SELECT * FROM "{table.name}"').fetchall(), key=repr)
            for table in TABLES
            if table.name != "runs"  # its run id and times are the run's own
        }


def test_killed_and_restarted_analysis_publishes_what_an_uninterrupted_one_does(
    kafka: Any, spark: Any, tmp_path: Path
) -> None:
    killed, calm = tmp_path / "killed", tmp_path / "calm"
    pipeline, config = collected(kafka, killed)
    shutil.copytree(killed, calm)
    calm_config = pipeline.write_config(calm, kafka.bootstrap_servers)
    # The uninterrupted run: the same analysis in this process, on the session's Spark, on
    # its own copy (it judges as of the samples' newest time, whenever it runs), in a thread
    # beside the killed runs.
    calm_job = AnalysisJob(load_config(calm_config), kafka.bootstrap_servers, spark=spark)
    calm_job.progress = lambda line: None
    with ThreadPoolExecutor(1) as pool:
        calm_run = pool.submit(calm_job.run_once)
        fingerprints = killed / "state" / "fingerprints"
        _kill_when(
            config,
            lambda: (
                fingerprints.is_dir()
                and any(p.name.startswith(".") and p.is_dir() for p in fingerprints.iterdir())
            ),
            "the audit to start writing its batch",
        )
        state = killed / "state"
        _kill_when(
            config,
            lambda: any(p.name.startswith(f".{PUBLISHED_FILE}.") for p in state.iterdir()),
            "the publication to start writing",
        )
        assert not (state / PUBLISHED_FILE).exists(), "nothing may be published by killed runs"
        _complete(config)
        calm_run.result()

    restarted, uninterrupted = _tables(state), _tables(calm / "state")
    assert restarted == uninterrupted
    verdicts = restarted["verdicts"]
    assert len(verdicts) == 1 and verdicts[0][2] == "at-least-once"  # 10 duplicates, no loss
    duplicates = [row for row in restarted["duplicates"] if row[1] == pipeline.sink]
    assert len(duplicates) == 2 * DUPLICATED
    # The range was audited once: one batch of fingerprints, not two.
    batches = [p for p in fingerprints.iterdir() if p.name.startswith("batch-")]
    assert len(batches) == 1, batches
