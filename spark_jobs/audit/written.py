"""What Parquet part files hold, counted on the driver from the files themselves: per
topic-partition the rows and their lowest and highest timestamp.

The audit counts its chunks and its batch this way rather than with a Spark job each: at the
audit's sizes a job costs 0.3-1 s on 2 cores whatever its rows (bench/HISTORY.md, "Audit:
throughput against the engine's floor"). The files are read a record batch of three columns
at a time, so the driver holds one batch whatever the folder's size. The driver already
reads the state dir's files (it fsyncs and renames the batches), so a Spark cluster's
executors and the driver share it in any case.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dgm.contracts.samples import Key

_COLUMNS = ["topic", "partition", "timestamp"]
_ROWS_AT_ONCE = 1 << 18


@dataclass(frozen=True)
class Written:
    """Rows of one topic-partition, and their lowest and highest timestamp (None: all null)."""

    rows: int
    lowest: datetime | None = None
    highest: datetime | None = None

    def plus(self, other: Written) -> Written:
        lows = [t for t in (self.lowest, other.lowest) if t is not None]
        highs = [t for t in (self.highest, other.highest) if t is not None]
        return Written(self.rows + other.rows, min(lows, default=None), max(highs, default=None))


def part_files(folder: Path) -> list[Path]:
    """The Parquet part files directly in `folder` (Spark's names; not its hidden files)."""
    return sorted(p for p in folder.glob("*.parquet") if not p.name.startswith(("_", ".")))


def written(files: Iterable[Path]) -> dict[Key, Written]:
    """Per (topic, partition): what `files` (FINGERPRINT Parquet) hold."""
    found: dict[Key, Written] = {}
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(_ROWS_AT_ONCE, columns=_COLUMNS):
            stamps = batch.column("timestamp").cast(pa.timestamp("us"), safe=False)
            table = pa.table(
                {"topic": batch.column("topic"), "partition": batch.column("partition"),
                 "timestamp": stamps}
            )  # fmt: skip
            grouped = table.group_by(["topic", "partition"]).aggregate(
                [([], "count_all"), ("timestamp", "min"), ("timestamp", "max")]
            )
            for row in grouped.to_pylist():
                key = (row["topic"], row["partition"])
                seen = Written(row["count_all"], _utc(row["timestamp_min"]),
                               _utc(row["timestamp_max"]))  # fmt: skip
                found[key] = found[key].plus(seen) if key in found else seen
    return found


def _utc(value: datetime | None) -> datetime | None:
    # Spark writes instants; pyarrow reads them without a zone.
    return None if value is None else value.replace(tzinfo=UTC)
