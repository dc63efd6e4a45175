"""Duplicate metrics, the engine's and the DuckDB reference's, in one canonical order: rows
as sorted tuples of comparable values, and the per-topic summary's columns."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any


def _value(v: Any) -> Any:
    if isinstance(v, datetime):  # naive from Spark (local = UTC here), aware from DuckDB
        return round(v.timestamp() * 1_000_000)
    if isinstance(v, float):
        return round(v, 12)
    return v


def canonical(rows: Iterable[Mapping[str, Any]], columns: list[str]) -> list[tuple[Any, ...]]:
    """Rows as sorted tuples of comparable values, nulls last within a column."""
    tuples = [tuple(_value(row[c]) for c in columns) for row in rows]
    return sorted(tuples, key=lambda t: tuple((v is None, "" if v is None else v) for v in t))


SUMMARY = [
    "topic", "records", "distinct_ids", "duplicate_copies", "duplicate_rate", "unidentified",
    "aborted",
]  # fmt: skip
