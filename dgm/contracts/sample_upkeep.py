"""Keeps the sample store bounded: files compacted per clock minute, hour and day once it is
over, files beyond retention deleted, covered files and stale temp files removed
(dgm.contracts.samples says what covering is).

Crash-safe at every step: the merged file is written to a hidden temp name, fsynced and linked
to its name before any original goes, so a kill loses no committed sample and leaves no
half-written one; an original the merged file covers is skipped by readers at once and deleted
only after `linger_s`, so a reader that listed it just before (a Spark job planning its scan)
can still open it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dgm.contracts.sample_schemas import SCHEMAS
from dgm.contracts.samples import SampleStore, compacted_name, set_aside, span
from dgm.util.durable import fsync

MINUTE_MS, HOUR_MS, DAY_MS = 60_000, 3_600_000, 86_400_000
TIERS_MS = (MINUTE_MS, HOUR_MS, DAY_MS)


@dataclass
class Upkeep:
    """What one pass did, per kind summed."""

    merged: int = 0  # files whose rows went into a compacted file
    written: int = 0  # compacted files written
    expired: int = 0  # files deleted beyond retention
    removed: int = 0  # covered files and stale temp files deleted
    errors: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"sample upkeep: {self.merged} files compacted into {self.written}, "
            f"{self.expired} beyond retention deleted, {self.removed} leftovers removed"
        )


def keep_bounded(
    store: SampleStore,
    now: datetime,
    retention: timedelta,
    settle: timedelta = timedelta(seconds=5),
    linger_s: float = 300.0,
) -> Upkeep:
    """One upkeep pass over every sample kind (see the module's doc)."""
    done = Upkeep()
    now_ms = int(now.timestamp() * 1000)
    for kind in SCHEMAS:
        try:
            _expire(store, kind, now_ms - int(retention.total_seconds() * 1000), done)
            _compact(store, kind, now_ms - int(settle.total_seconds() * 1000), done)
            _remove_leftovers(store, kind, linger_s, done)
        except (OSError, pa.ArrowException) as error:
            # A damaged file stays where it is (readers name it); the other kinds go on.
            done.errors.append(f"{kind}: {error}")
    return done


def _last_ms(path: Path) -> int:
    found = span(path.name)
    assert found is not None
    return found[1][0]


def _expire(store: SampleStore, kind: str, before_ms: int, done: Upkeep) -> None:
    """Delete files all of whose rows are older than `before_ms`; the newest file stays (it
    holds the state a restarted collector continues from)."""
    files = store.files(kind)
    for path in files[:-1]:
        if _last_ms(path) < before_ms:
            path.unlink(missing_ok=True)
            done.expired += 1


def _compact(store: SampleStore, kind: str, before_ms: int, done: Upkeep) -> None:
    """Per tier, smallest first: merge the files of each bucket (a clock minute, hour, day)
    that ended before `before_ms`. Readers then list at most the current minute's files, a
    file per minute of the current hour, per hour of the current day, per day before."""
    for tier_ms in TIERS_MS:
        files = store.files(kind)
        buckets: dict[int, list[Path]] = defaultdict(list)
        for path in files[:-1]:  # the newest file stays as it is: writers name the next after it
            found = span(path.name)
            assert found is not None
            bucket = found[0][0] // tier_ms
            if found[1][0] // tier_ms == bucket and (bucket + 1) * tier_ms <= before_ms:
                buckets[bucket].append(path)
        for group in buckets.values():
            if len(group) > 1 and _merge(store, kind, group) is not None:
                done.merged += len(group)
                done.written += 1


def _merge(store: SampleStore, kind: str, group: list[Path]) -> Path | None:
    folder = store.kind_dir(kind)
    tables = []
    for path in group:
        try:
            tables.append(pq.read_table(path, schema=SCHEMAS[kind]))
        except (OSError, pa.ArrowException) as error:
            set_aside(path, error)
            return None  # the bucket is merged next pass, without the damaged file
    table = pa.concat_tables(tables)
    final = folder / compacted_name(group[0].name, group[-1].name)
    temp = folder / f".{os.getpid()}-{time.monotonic_ns()}.parquet.tmp"
    try:
        pq.write_table(table, temp, row_group_size=256 * 1024)
        fsync(temp)
        # Exists: written by an earlier pass that died before its originals were covered.
        with contextlib.suppress(FileExistsError):
            os.link(temp, final)
    finally:
        temp.unlink(missing_ok=True)
    fsync(folder)
    return final


def _remove_leftovers(store: SampleStore, kind: str, linger_s: float, done: Upkeep) -> None:
    folder = store.kind_dir(kind)
    if not folder.is_dir():
        return
    now = time.time()
    covered = store.covered(kind)
    # (span, seconds since written) of every merged file, listed or itself covered since: an
    # original may go once the first file that covered it is `linger_s` old.
    merged = [
        (found, now - p.stat().st_mtime)
        for p in [*store.files(kind), *covered]
        if (found := span(p.name)) is not None and found[0] != found[1]
    ]
    for path in covered:
        mine = span(path.name)
        assert mine is not None
        ages = [age for s, age in merged if s != mine and s[0] <= mine[0] and mine[1] <= s[1]]
        if ages and max(ages) > linger_s:
            path.unlink(missing_ok=True)
            done.removed += 1
    for temp in folder.glob(".*.parquet.tmp"):
        if temp.stat().st_mtime < now - 3600:  # a writer killed mid-write long ago
            temp.unlink(missing_ok=True)
            done.removed += 1
