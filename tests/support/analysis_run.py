"""One analysis of what a test's pipelines wrote, as `dgm analyze --once` does it: the
collectors sample two more cycles, then the analysis job runs on the session's Spark; and the
verdict it published."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dgm.config.loader import load_config
from dgm.contracts.published import PUBLISHED_FILE, open_read_only, read_verdicts
from dgm.util.waiting import wait_until
from spark_jobs.job import AnalysisJob
from tests.support.published_lab import collecting


def analyze_once(kafka: Any, spark: Any, config_path: Path) -> None:
    """Collect two more cycles of the config's cluster, then one analysis on `spark`."""
    config = load_config(config_path)
    offsets = config.state_dir / "samples" / "group_offsets"
    before = len(list(offsets.glob("*.parquet")))
    with collecting(kafka.bootstrap_servers, config, interval_s=0.5):
        wait_until(
            lambda: len(list(offsets.glob("*.parquet"))) >= before + 2, 60, "2 collector cycles"
        )
    job = AnalysisJob(config, kafka.bootstrap_servers, master="local[2]", spark=spark)
    job.progress = lambda line: None
    job.run_once()


def verdict(config_path: Path, pipeline: str) -> dict[str, Any]:
    """The pipeline's published verdict row."""
    with open_read_only(load_config(config_path).state_dir / PUBLISHED_FILE) as db:
        rows, _ = read_verdicts(db)
    return next(row for row in rows if row["pipeline"] == pipeline)
