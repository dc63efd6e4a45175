"""Append-only Parquet sample files under `<state_dir>/samples/<kind>/`.

A file is named `<epoch-ms, 13 digits>-<seq, 6 digits>.parquet`; names only ever grow, so
sorting names sorts by write order and a reader (Spark) that remembers the last name it read
picks up exactly the new files with `files_after`. A file is written to a hidden temp name
(Spark and Hadoop skip names starting with '.'), fsynced, then linked to its final name, so a
crash leaves either a whole file or none; the link also refuses to overwrite a file that
another writer got to first.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dgm.durable import fsync
from dgm.sample_schemas import SCHEMAS

SAMPLES_DIR = "samples"
# A topic-partition.
Key = tuple[str, int]


@dataclass(frozen=True)
class PartitionOffsets:
    """One partition's offsets as an `offsets` sample holds them (dgm.sample_schemas.OFFSETS):
    what the collectors fetch and what the audit bounds its ranges by."""

    topic: str
    partition: int
    log_start_offset: int
    high_watermark: int
    lso: int
    leader: int | None = None  # the broker that answered; unknown when read back from a file


_NAME = re.compile(r"(\d{13})-(\d{6})\.parquet")


def samples_dir(state_dir: Path) -> Path:
    return state_dir / SAMPLES_DIR


def file_name(epoch_ms: int, seq: int) -> str:
    return f"{epoch_ms:013d}-{seq:06d}.parquet"


def next_name(last: str | None, now_ms: int) -> tuple[int, int]:
    """(epoch_ms, seq) for the next file: after `last`, even if the clock went back."""
    if last is None or not (match := _NAME.fullmatch(last)):
        return now_ms, 0
    last_ms, last_seq = int(match[1]), int(match[2])
    if now_ms > last_ms:
        return now_ms, 0
    return last_ms, last_seq + 1


def rows_table(kind: str, rows: Iterable[Any]) -> pa.Table:
    """Rows (dataclasses or dicts whose names are the kind's columns) as a table of its schema.

    Built column by column, timestamps as epoch milliseconds: for 10,000 offsets rows 0.02 s,
    where dataclasses.asdict + Table.from_pylist took 0.41 s.
    """
    schema = SCHEMAS[kind]
    rows = list(rows)
    if not rows:
        return schema.empty_table()
    first = rows[0]
    names = [f.name for f in fields(first)] if is_dataclass(first) else list(first)
    if set(names) != set(schema.names):
        raise ValueError(
            f"{kind} rows have columns {sorted(names)}, the schema has {sorted(schema.names)}"
        )
    if is_dataclass(first):
        columns = {name: [getattr(row, name) for row in rows] for name in schema.names}
    else:
        columns = {name: [row[name] for row in rows] for name in schema.names}
    for column in schema:
        if pa.types.is_timestamp(column.type):
            columns[column.name] = [_epoch_ms(value) for value in columns[column.name]]
    return pa.table(columns, schema=schema)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def _epoch_ms(value: datetime | None) -> int | None:
    """pyarrow converts aware datetimes far slower than integers (0.37 s per 10,000)."""
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}: sample times must be UTC-aware")
    return (value - _EPOCH) // _MS


class SampleStore:
    """Writes and lists the sample files of one state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.root = samples_dir(state_dir)

    def kind_dir(self, kind: str) -> Path:
        if kind not in SCHEMAS:
            raise ValueError(f"unknown sample kind {kind!r} (known: {', '.join(SCHEMAS)})")
        return self.root / kind

    def files(self, kind: str) -> list[Path]:
        """Every complete file of `kind`, oldest first."""
        folder = self.kind_dir(kind)
        if not folder.is_dir():
            return []
        return sorted(p for p in folder.iterdir() if _NAME.fullmatch(p.name))

    def files_after(self, kind: str, marker: str | Path | None) -> list[Path]:
        """Files of `kind` written after `marker` (a file name or path); all when None."""
        after = Path(marker).name if marker is not None else ""
        return [p for p in self.files(kind) if p.name > after]

    def latest(self, kind: str) -> Path | None:
        found = self.files(kind)
        return found[-1] if found else None

    def newest_time(self, kind: str) -> datetime | None:
        """When the newest file of `kind` was written (its name starts with it); None when
        there is none."""
        latest = self.latest(kind)
        return None if latest is None else datetime.fromtimestamp(int(latest.name[:13]) / 1000, UTC)

    def write(self, kind: str, rows: Iterable[Any]) -> Path:
        return self.write_table(kind, rows_table(kind, rows))

    def write_table(self, kind: str, table: pa.Table) -> Path:
        if not table.schema.equals(SCHEMAS[kind], check_metadata=False):
            raise ValueError(f"table does not have the {kind} schema:\n{table.schema}")
        folder = self.kind_dir(kind)
        folder.mkdir(parents=True, exist_ok=True)
        temp = folder / f".{os.getpid()}-{time.monotonic_ns()}.parquet.tmp"
        try:
            pq.write_table(table, temp)
            fsync(temp)
            final = self._link_new_name(folder, temp)
        finally:
            temp.unlink(missing_ok=True)
        fsync(folder)  # the new directory entry survives a crash too
        return final

    def _link_new_name(self, folder: Path, temp: Path) -> Path:
        latest = self.latest(folder.name)
        last = latest.name if latest is not None else None
        while True:
            epoch_ms, seq = next_name(last, time.time_ns() // 1_000_000)
            final = folder / file_name(epoch_ms, seq)
            try:
                os.link(temp, final)
                return final
            except FileExistsError:
                last = final.name  # another writer took the name: take the next one

    def read(self, kind: str, paths: Iterable[Path] | None = None) -> pa.Table:
        """The rows of `paths` (default: every file of `kind`) as one table."""
        chosen = list(paths) if paths is not None else self.files(kind)
        tables = [pq.read_table(path, schema=SCHEMAS[kind]) for path in chosen]
        return pa.concat_tables(tables) if tables else SCHEMAS[kind].empty_table()


def latest_rows(store: SampleStore, kind: str, cluster_id: str) -> list[Mapping[str, Any]]:
    """The rows of the newest `kind` file that belong to `cluster_id` (state after a restart)."""
    latest = store.latest(kind)
    if latest is None:
        return []
    return [
        row for row in store.read(kind, [latest]).to_pylist() if row["cluster_id"] == cluster_id
    ]
