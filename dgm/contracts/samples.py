"""Parquet sample files under `<state_dir>/samples/<kind>/`.

A file is named `<epoch-ms, 13 digits>-<seq, 6 digits>.parquet`; names only ever grow, so
sorting names sorts by write order. A file is written to a hidden temp name (Spark and Hadoop
skip names starting with '.'), fsynced, then linked to its final name, so a crash leaves
either a whole file or none; the link also refuses to overwrite a file that another writer got
to first.

Old files are compacted (dgm.contracts.sample_upkeep): the rows of files `A` .. `K` are written
to one file named `A-K` (`<ms>-<seq>-<ms>-<seq>.parquet`), which *covers* every file whose name
lies in that span. `files()` lists only files no other file covers, so the originals a crash
leaves behind after the merged file was linked are never read twice, and a reader never sees
the merged file half-written.
"""

from __future__ import annotations

import logging
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

from dgm.contracts.sample_schemas import SCHEMAS
from dgm.util.durable import fsync

log = logging.getLogger(__name__)

SAMPLES_DIR = "samples"
# A topic-partition.
Key = tuple[str, int]


@dataclass(frozen=True)
class PartitionOffsets:
    """One partition's offsets as an `offsets` sample holds them
    (dgm.contracts.sample_schemas.OFFSETS):
    what the collectors fetch and what the audit bounds its ranges by."""

    topic: str
    partition: int
    log_start_offset: int
    high_watermark: int
    lso: int
    leader: int | None = None  # the broker that answered; unknown when read back from a file
    # The leader epoch the high watermark was answered in; None when unknown (an older sample)
    leader_epoch: int | None = None


_NAME = re.compile(r"(\d{13})-(\d{6})(?:-(\d{13})-(\d{6}))?\.parquet")
# A file's place: (epoch_ms, seq) of the first and of the last file whose rows it holds.
Span = tuple[tuple[int, int], tuple[int, int]]


def span(name: str) -> Span | None:
    """The span of a sample file name; None for a name that is not a sample file's."""
    match = _NAME.fullmatch(name)
    if match is None:
        return None
    first = (int(match[1]), int(match[2]))
    last = (int(match[3]), int(match[4])) if match[3] else first
    return first, last


def uncovered(paths: Iterable[Path]) -> tuple[list[Path], list[Path]]:
    """(the files no other file covers, oldest first; the covered ones)."""
    spans = sorted(
        ((found, path) for path in paths if (found := span(path.name)) is not None),
        key=lambda item: (item[0][0], tuple(-v for v in item[0][1])),
    )
    kept: list[Path] = []
    covered: list[Path] = []
    reach: tuple[int, int] | None = None
    for (_first, last), path in spans:
        if reach is not None and last <= reach:
            covered.append(path)
            continue
        kept.append(path)
        reach = last
    return kept, covered


def samples_dir(state_dir: Path) -> Path:
    return state_dir / SAMPLES_DIR


def file_name(epoch_ms: int, seq: int) -> str:
    return f"{epoch_ms:013d}-{seq:06d}.parquet"


def compacted_name(first: str, last: str) -> str:
    """The name of the file holding the rows of files `first` .. `last` (sample file names)."""
    start, end = span(first), span(last)
    if start is None or end is None:
        raise ValueError(f"not sample file names: {first!r}, {last!r}")
    (ms, seq), (end_ms, end_seq) = start[0], end[1]
    return f"{ms:013d}-{seq:06d}-{end_ms:013d}-{end_seq:06d}.parquet"


def next_name(last: str | None, now_ms: int) -> tuple[int, int]:
    """(epoch_ms, seq) for the next file: after `last`, even if the clock went back."""
    found = span(last) if last is not None else None
    if found is None:
        return now_ms, 0
    last_ms, last_seq = found[1]
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
    # A nullable column the rows lack (one added to the schema later) is null.
    optional = {f.name for f in schema if f.nullable}
    if set(names) - set(schema.names) or set(schema.names) - set(names) - optional:
        raise ValueError(
            f"{kind} rows have columns {sorted(names)}, the schema has {sorted(schema.names)}"
        )
    given = set(names)
    if is_dataclass(first):
        columns = {
            name: [getattr(row, name) if name in given else None for row in rows]
            for name in schema.names
        }
    else:
        columns = {name: [row.get(name) for row in rows] for name in schema.names}
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

    def _all(self, kind: str) -> list[Path]:
        folder = self.kind_dir(kind)
        if not folder.is_dir():
            return []
        return [p for p in folder.iterdir() if _NAME.fullmatch(p.name)]

    def files(self, kind: str) -> list[Path]:
        """Every complete file of `kind` that no compacted file covers, oldest first."""
        return uncovered(self._all(kind))[0]

    def covered(self, kind: str) -> list[Path]:
        """Files of `kind` whose rows a compacted file holds too: never read, deleted later."""
        return uncovered(self._all(kind))[1]

    def readable_files(self, kind: str) -> list[Path]:
        """files(kind) whose Parquet footer reads; a damaged file (truncated or overwritten on
        disk) is moved to `<kind>/damaged/` with a warning naming it, so it stops every read
        without being lost."""
        found = []
        for path in self.files(kind):
            try:
                pq.read_metadata(path)
            except (OSError, pa.ArrowException) as error:
                set_aside(path, error)
                continue
            found.append(path)
        return found

    def files_after(self, kind: str, marker: str | Path | None) -> list[Path]:
        """Files of `kind` written after `marker` (a file name or path); all when None."""
        after = span(Path(marker).name) if marker is not None else None
        return [p for p in self.files(kind) if after is None or _last(p) > after[1]]

    def latest(self, kind: str) -> Path | None:
        found = self.files(kind)
        return max(found, key=_last) if found else None

    def newest_time(self, kind: str) -> datetime | None:
        """When the newest file of `kind` was written (its name says it); None when there is
        none."""
        latest = self.latest(kind)
        return None if latest is None else datetime.fromtimestamp(_last(latest)[0] / 1000, UTC)

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
        chosen = list(paths) if paths is not None else self.readable_files(kind)
        tables = [pq.read_table(path, schema=SCHEMAS[kind]) for path in chosen]
        return pa.concat_tables(tables) if tables else SCHEMAS[kind].empty_table()


DAMAGED_DIR = "damaged"


def set_aside(path: Path, error: BaseException) -> Path:
    """Move a damaged sample file to `damaged/` beside it, never deleted: readers skip it."""
    folder = path.parent / DAMAGED_DIR
    folder.mkdir(exist_ok=True)
    moved = folder / path.name
    os.replace(path, moved)
    log.warning(
        "sample file %s is damaged (%s): moved to %s, skipped from now on", path, error, moved
    )
    return moved


def _last(path: Path) -> tuple[int, int]:
    found = span(path.name)
    assert found is not None  # only sample file names are listed
    return found[1]


def latest_rows(
    store: SampleStore, kind: str, cluster_id: str, look_back: int = 1
) -> list[Mapping[str, Any]]:
    """The rows that belong to `cluster_id` of the newest readable `kind` file holding any,
    among the newest `look_back` files (state after a restart). Collectors of several
    clusters write one file each per cycle: `look_back` is their number, so another
    cluster's newer file is passed over while an older one of this cluster is not reached."""
    readable = store.readable_files(kind)
    for path in sorted(readable, key=_last, reverse=True)[:look_back]:
        rows = [r for r in store.read(kind, [path]).to_pylist() if r["cluster_id"] == cluster_id]
        if rows:
            return rows
    return []
