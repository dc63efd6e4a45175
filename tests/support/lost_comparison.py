"""The engine's lost rows against the DuckDB reference's: both in one canonical order, and
counted per 60-second window."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from dgm.contracts.published import LOST

# The published columns but the pipeline and the cluster (filled when the analysis publishes,
# from the topic: spark_jobs/analyze/cluster_columns.py).
RESULT = [c for c in LOST.names if c not in ("pipeline", "cluster")]


def _value(v: Any) -> Any:
    if isinstance(v, datetime):  # naive from Spark (UTC session), aware from DuckDB
        return round(v.replace(tzinfo=UTC).timestamp() * 1_000_000)
    return v


def canonical(rows: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    tuples = [tuple(_value(row[c]) for c in RESULT) for row in rows]
    return sorted(tuples, key=lambda t: tuple((v is None, "" if v is None else v) for v in t))


def assert_same(ours: list[dict[str, Any]], theirs: pa.Table) -> list[tuple[Any, ...]]:
    mine = canonical(ours)
    assert mine == canonical(theirs.to_pylist())
    return mine


def lost_per_window(theirs: pa.Table) -> dict[datetime, int]:
    """The reference's lost counts per 60-second window of their window_at."""
    found: dict[datetime, int] = {}
    for r in theirs.to_pylist():
        at = r["window_at"].astimezone(UTC)
        start = at - timedelta(seconds=at.timestamp() % 60)
        found[start] = found.get(start, 0) + r["missing"]
    return found
