"""A published dgm.duckdb built from the contract's DDL (dgm/published.py), with given rows."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from dgm.published import PUBLISHED_FILE, TABLES

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def publish(state_dir: Path, rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> Path:
    """Every table created by its DDL, `rows` inserted by column name, renamed into place."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / PUBLISHED_FILE
    new = state_dir / f".{PUBLISHED_FILE}.new"
    new.unlink(missing_ok=True)
    with duckdb.connect(str(new)) as db:
        db.execute("SET TimeZone = 'UTC'")
        for table in TABLES:
            db.execute(table.ddl())
        for name, table_rows in rows.items():
            for row in table_rows:
                columns = ", ".join(f'"{c}"' for c in row)
                marks = ", ".join("?" for _ in row)
                db.execute(f'INSERT INTO "{name}" ({columns}) VALUES ({marks})', list(row.values()))
    os.replace(new, path)
    return path


def verdict(pipeline: str, **values: Any) -> dict[str, Any]:
    base = {"pipeline": pipeline, "declared": "exactly-once", "achieved": "exactly-once"}
    return {**base, "meets_declared": True, "duplicate_rate": 0.0, "lost": 0, **values}
