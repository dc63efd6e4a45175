"""The runs table: one row per analysis run."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pyarrow as pa

from dgm.config.document import DgmConfig
from dgm.contracts import published as tables
from spark_jobs.analyze.publish import Published, arrow_of
from spark_jobs.analyze.samples import last_sample_at

Run = dict[str, Any]


def runs(
    config: DgmConfig, fingerprints: int, samples: Mapping[str, pa.Table], spark_master: str
) -> list[Run]:
    """The runs row without what only the caller knows (run_id, started_at, finished_at,
    records_audited): fill those with `fill_run`."""
    return [
        {
            "fingerprints": fingerprints,
            "last_sample_at": last_sample_at(samples),
            "window_s": config.analysis.window_s,
            "spark_master": spark_master,
        }
    ]


def fill_run(
    run: Published,
    run_id: str,
    started_at: datetime,
    finished_at: datetime,
    records_audited: int | None = None,
) -> list[Run]:
    """`run` (from `runs`) with the fields only the caller knows."""
    filled = {"run_id": run_id, "started_at": started_at, "finished_at": finished_at}
    rows = arrow_of(run, tables.RUNS).to_pylist()
    return [row | filled | {"records_audited": records_audited} for row in rows]
