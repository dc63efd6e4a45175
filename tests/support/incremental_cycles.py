"""Generated fingerprints dealt to the incremental engine's cycles, the committed offsets
claimed after each, and the published tables in one canonical order for comparing cycles."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tests.support.duplicate_comparison import canonical

CYCLES = 9


def batches_of(table: pa.Table, rng: np.random.Generator) -> np.ndarray:
    """A cycle per row: rows come roughly in time order, neighbouring cycles overlapping."""
    seconds = pc.cast(table["timestamp"], pa.int64()).to_numpy()
    rank = np.argsort(np.argsort(seconds, kind="stable"), kind="stable") / len(seconds)
    jitter = rng.uniform(-0.8, 0.8, len(seconds))
    return np.clip(np.floor(rank * CYCLES + jitter), 0, CYCLES - 1).astype(np.int64)


def claims(rows: pa.Table, pipelines: dict[str, str], halve: bool) -> dict[Any, int]:
    """(pipeline, topic, partition) -> the next offset after the rows seen (halved: a reset)."""
    found: dict[Any, int] = {}
    for name, topic in pipelines.items():
        source = rows.filter(pc.equal(rows["topic"], topic))
        for r in source.group_by("partition").aggregate([("offset", "max")]).to_pylist():
            found[(name, topic, r["partition"])] = (r["offset_max"] + 1) // (2 if halve else 1)
    return found


def canonical_all(tables: dict[str, pa.Table], counts: pa.Table) -> dict[str, list[Any]]:
    found = {name: canonical(t.to_pylist(), t.column_names) for name, t in tables.items()}
    return found | {"pipeline_counts": canonical(counts.to_pylist(), counts.column_names)}
