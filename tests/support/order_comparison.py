"""Records out of order, the engine's and the DuckDB reference's, in one canonical order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from dgm.contracts.published import OUT_OF_ORDER

# The published columns but the pipeline (a sink row per pipeline) and the cluster (filled
# when the analysis publishes, from the topic).
RESULT = [c for c in OUT_OF_ORDER.names if c not in ("pipeline", "cluster")]


def _value(v: Any) -> Any:
    if isinstance(v, datetime):
        return round(v.replace(tzinfo=UTC).timestamp() * 1_000_000)
    return v


def canonical(rows: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    tuples = [tuple(_value(row[c]) for c in RESULT) for row in rows]
    return sorted(tuples, key=lambda t: tuple((v is None, "" if v is None else v) for v in t))
