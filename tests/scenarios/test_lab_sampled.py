"""The lab's SIGKILLed pipelines analyzed again with 1 in 10 message ids kept (and 1 in 100
under DGM_LONG=1; docs/design.md, "Sampled pipelines"), from the same topics and collector
samples: the counts equal the truth restricted to the kept ids, and the exact run's rates
lie in the intervals of the sampled counts."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dgm.config.loader import load_config
from dgm.contracts.published import PUBLISHED_FILE
from dgm.contracts.sampling import kept_below, wilson_interval
from lab.ledger import read_ledger
from spark_jobs.job import AnalysisJob
from spark_jobs.sampling import id_hash
from tests.support.published_lab import PublishedLab
from tests.support.strength import by_strength
from tests.support.truth import by_id, extra_copies, topic_ids

RUNS = ("at-most-once", "at-least-once", "exactly-once")
Z_999 = 3.2905  # two-sided 99.9%


def _verdicts(database: Path) -> dict[str, dict[str, Any]]:
    with duckdb.connect(str(database), read_only=True) as db:
        cursor = db.execute("SELECT * FROM verdicts")
        names = [d[0] for d in cursor.description]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cursor.fetchall()}


def _sampled_state(lab: PublishedLab, root: Path, one_in: int) -> Path:
    """The lab's folder copied with its collector samples only (nothing audited yet), its
    dgm.toml keeping 1 in `one_in` ids; the copy's config path."""
    source = lab.config.source
    assert source is not None
    shutil.copytree(source.parent, root)
    for kept in (root / "state").iterdir():
        if kept.name != "samples":
            shutil.rmtree(kept) if kept.is_dir() else kept.unlink()
    config = root / source.name
    text = config.read_text().replace(str(source.parent), str(root))
    config.write_text(text.replace("[analysis]\n", f"[analysis]\nsample_one_in = {one_in}\n", 1))
    return config


@pytest.mark.parametrize("one_in", by_strength([10], [10, 100]))
def test_sampled_lab_runs_count_their_kept_ids_and_bound_the_exact_rates(
    published_lab: PublishedLab, kafka: Any, spark: Any, tmp_path: Path, one_in: int
) -> None:
    config = load_config(_sampled_state(published_lab, tmp_path / "lab", one_in))
    job = AnalysisJob(config, kafka.bootstrap_servers, spark=spark)
    job.progress = lambda line: None
    job.run_once()
    sampled, exact = _verdicts(config.state_dir / PUBLISHED_FILE), _verdicts(published_lab.database)
    for run in RUNS:
        report = published_lab.reports[run]
        assert report.sink_topic is not None
        acked = set(read_ledger(Path(report.ledger_path)).acked)
        sink = by_id(topic_ids(kafka, report.sink_topic))
        ids = sorted(acked | set(sink))
        hashes = spark.createDataFrame([(i,) for i in ids], "id string")
        kept = {
            row["id"] for row in hashes.where(id_hash(hashes["id"]) < kept_below(one_in)).collect()
        }
        mine, whole = sampled[report.pipeline], exact[report.pipeline]
        assert mine["sample_one_in"] == one_in
        assert mine["records_checked"] == len(acked & kept)
        assert mine["lost"] == len((acked - set(sink)) & kept)
        kept_sink = by_id_restricted(sink, kept)
        assert mine["duplicate_copies"] + mine["upstream_duplicates"] == extra_copies(kept_sink)
        # A 95% interval misses the true rate in 1 run of 20 by design, and each session's
        # lab runs differ: the published interval is checked on fixed generated data
        # (tests/spark_jobs/analyze/test_sampled.py); here the same counts' 99.9% interval
        # must hold it.
        for rate, hits, trials in (
            ("duplicate_rate", mine["duplicate_copies"], mine["distinct_ids"]),
            ("loss_rate", mine["lost"], mine["records_checked"]),
        ):
            wide = wilson_interval(hits, trials, z=Z_999) if hits <= trials else None
            if whole[rate] is not None and wide is not None:
                assert wide[0] <= whole[rate] <= wide[1], (run, rate, whole[rate], wide)


def by_id_restricted(copies: Any, kept: set[str]) -> Any:
    return type(copies)({i: n for i, n in copies.items() if i in kept})
