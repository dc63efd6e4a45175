"""The fingerprints an analysis run works on, as one value: loaded once (by
audit.incremental_load) and handed down to the analysis unchanged.

Besides every fingerprint now (`kept`, plus the external sinks' snapshots), it says how they
differ from the last load's, when that is known: the engine then recomputes only what the
added rows touch (analyze/engine.py) instead of every table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame

from dgm.contracts.fingerprints import FINGERPRINT

# A load whose new batches hold at most this many fingerprints reads them on the driver too
# (`added_rows`), for the engine to work a small cycle there (analyze/small_cycle.py).
FEW_ADDED = 50_000
# FINGERPRINT, every column nullable: what Spark's toArrow of a fingerprint frame gives.
ROWS = pa.schema([field.with_nullable(True) for field in FINGERPRINT])


def conformed(table: pa.Table) -> pa.Table:
    """`table`'s fingerprint columns as ROWS, so tables read by Spark and by pyarrow concat."""
    return table.select(ROWS.names).cast(ROWS)


@dataclass(frozen=True)
class Fingerprints:
    """Every fingerprint now and, when known, how they differ from the last load's."""

    kept: DataFrame  # every fingerprint of the store's batches (no external snapshots)
    external: DataFrame | None = None  # the external sinks' snapshots, read whole
    # None when the last load's rows are not known (first load, everything read again)
    before: DataFrame | None = None
    added: DataFrame | None = None  # kept - before
    external_before: DataFrame | None = None  # the external snapshots of the last load
    count: int | None = None  # rows of `whole`, when the loader counted them
    # The fingerprints re-reads found Kafka no longer holds as audited (dgm.contracts.fingerprints.
    # DISPLACED; docs/design.md, "Log integrity"); None when not loaded (none then)
    displaced: pa.Table | None = None
    # (topic, partition) -> the lowest offset its audits started at (the batches' ranges),
    # when the loader knows it: a sampled partition's oldest kept fingerprint is not the
    # oldest record held (docs/design.md, "Sampled pipelines")
    audited_from: Mapping[tuple[str, int], int] | None = None
    # The same rows on the driver, as ROWS (`conformed`), for a cycle small enough to work
    # there (analyze/small_cycle.py): `added` when its batches are few (None otherwise), and
    # the external snapshots now and of the last load (read on the driver anyway).
    added_rows: pa.Table | None = None
    external_rows: pa.Table | None = None
    external_before_rows: pa.Table | None = None

    @property
    def whole(self) -> DataFrame:
        """Every fingerprint: the kept rows and the external snapshots."""
        return self.kept if self.external is None else self.kept.unionByName(self.external)

    @property
    def changed(self) -> bool:
        """Whether the difference from the last load is known (`before` and `added`)."""
        return self.before is not None and self.added is not None

    def counted(self) -> int:
        """How many fingerprints there are: `count`, or counted now."""
        return self.whole.count() if self.count is None else self.count
