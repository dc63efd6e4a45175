"""Event sample files in a sample store, written as the collector names them, at times
before a fixed NOW: what the store's upkeep and damage tests fill it with."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq

from dgm.contracts.sample_schemas import SCHEMAS
from dgm.contracts.samples import SampleStore, file_name, rows_table

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)


def event_file(store: SampleStore, at_ms: int, detail: str) -> Path:
    """One events sample file written at `at_ms` (named as the collector would name it)."""
    folder = store.kind_dir("events")
    folder.mkdir(parents=True, exist_ok=True)
    at = datetime.fromtimestamp(at_ms / 1000, UTC)
    row: dict[str, object] = {name: None for name in SCHEMAS["events"].names}
    row |= {"sampled_at": at, "cluster_id": "c", "event": "rebalance", "detail": detail}
    path = folder / file_name(at_ms, 0)
    pq.write_table(rows_table("events", [row]), path)
    return path


def details(store: SampleStore) -> Counter[str]:
    return Counter(store.read("events").column("detail").to_pylist())


def filled(tmp_path: Path, hours: float, every_s: int = 60) -> tuple[SampleStore, Counter[str]]:
    """Files every `every_s` over the last `hours` before NOW."""
    store = SampleStore(tmp_path / "state")
    count = int(hours * 3600 / every_s)
    for n in range(count):
        event_file(store, NOW_MS - (count - n) * every_s * 1000, f"e{n}")
    return store, details(store)
