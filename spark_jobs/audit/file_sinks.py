"""The audit's step for file external sinks (SQLite, DuckDB): each table read whole
(external.py) and stored as its pipeline's snapshot; a JDBC sink is read incrementally
instead (jdbc_audit.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from dgm.config.document import DgmConfig
from dgm.config.external_sinks import FILE_KINDS
from spark_jobs.audit.external import external_fingerprints
from spark_jobs.audit.store import FingerprintStore

Progress = Callable[[str], None]


def snapshot_file_sinks(
    config: DgmConfig, records: dict[str, int], progress: Progress
) -> dict[str, Path]:
    """pipeline -> its new snapshot; `records` gets the rows per sink name. Snapshots of
    pipelines without a file sink any more are removed."""
    store = FingerprintStore(config.state_dir)
    snapshots: dict[str, Path] = {}
    for pipeline in config.pipelines:
        if pipeline.external_sink is None or pipeline.external_sink.kind not in FILE_KINDS:
            continue  # a JDBC sink is read incrementally (jdbc_audit)
        began = time.monotonic()
        table = external_fingerprints(pipeline)
        snapshots[pipeline.name] = store.write_external(pipeline.name, table)
        name = pipeline.sink_names()[-1]
        records[name] = table.num_rows
        progress(
            f"audit: external sink {name}: {table.num_rows} rows in {time.monotonic() - began:.1f}s"
        )
    store.remove_external_except(set(snapshots))
    return snapshots
