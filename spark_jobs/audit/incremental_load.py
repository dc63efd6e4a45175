"""The retained fingerprints kept in the executors from one analysis run to the next, so a run
reads from disk only the batches committed since the last one.

Each run's audit commits one batch (FingerprintStore); re-reading every batch each run cost
a run time in proportion to everything retained (8.8 s of a run at 10M fingerprints,
bench/HISTORY.md, "The incremental engine"). Kept here: one persisted frame per batch read,
their union the state.

What the store does besides adding batches is followed from the manifests: a merge writes
one batch replacing others with exactly their rows (its `records` is their sum), so the
kept rows stay and only the bookkeeping changes. Anything else that removes a batch
(retention's compaction dropping rows, a recreated topic forgotten, a damaged batch set
aside, a re-read's rewrite of a truncated partition) or a replacement whose rows differ
makes the next run read everything again, as does
a failed run (`reset`): a kept frame whose executor is gone is recomputed from its files,
which a merge may have removed. A JDBC sink's added rows are a batch like any other (only
its added rows are new; audit/jdbc_audit.py). External sink (file) snapshots are read whole
each run (the audit rewrites them each run) on the driver and kept until the next, which
compares them. The state
lives in the executors, never only in the driver's Python process: on a cluster it is
rebuilt from the shared state directory.

Each `load` gives one Fingerprints value: the kept rows, the external snapshots, and how they
changed since the last load (`before` and `added`; the engine recomputes what the added rows
touch); `before` is None when everything was read.
"""

from __future__ import annotations

import contextlib
from functools import reduce
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from dgm.contracts.fingerprints import FINGERPRINT as ARROW_FINGERPRINT
from spark_jobs.analysis_input import FEW_ADDED, ROWS, Fingerprints, conformed
from spark_jobs.audit.batches import Batch, merged_ranges
from spark_jobs.audit.store import FingerprintStore, empty_fingerprints
from spark_jobs.audit.written import part_files
from spark_jobs.schemas import FINGERPRINT

# More kept frames than this are consolidated into one: each is a scan in every query plan.
MAX_PIECES = 16
# How the kept frames are persisted. PySpark's MEMORY_AND_DISK is the serialized level (its
# RDDs hold pickles), so each scan of a kept row deserialized its cached batch first
# (message ids and offsets of 10M rows: 0.5 against 0.22 s; a rebuild 7% longer:
# bench/HISTORY.md, "The rebuild at 10M: the kept rows deserialized"). DataFrame.cache()'s
# level keeps the cached batches as objects; they still spill to disk under pressure.
KEPT = StorageLevel.MEMORY_AND_DISK_DESER


class KeptFingerprints:
    def __init__(self, spark: SparkSession, state_dir: Path) -> None:
        self.spark = spark
        self.state_dir = Path(state_dir)
        self.store = FingerprintStore(self.state_dir)
        self.pieces: list[DataFrame] = []
        self.records: dict[str, int] = {}  # batch name -> rows, of the batches kept
        self.batches_read = 0  # batches read from disk by the last `load`
        # The external snapshots the last `load` read (the next compares its own with them),
        # as a frame and as the Arrow table it was made from.
        self.external: DataFrame | None = None
        self.external_rows: pa.Table | None = None

    def reset(self) -> None:
        """Forget every kept frame: the next `load` reads everything again."""
        for piece in self.pieces:
            with contextlib.suppress(Exception):  # a stopped session has nothing to free
                piece.unpersist()
        self.pieces, self.records = [], {}
        self.external, self.external_rows = None, None

    def load(self) -> Fingerprints:
        """Every complete batch's fingerprints and every external snapshot (what
        FingerprintStore.load reads), counted, and how they changed since the last call;
        only batches new since then are read when the store allows it."""
        batches = self.store.complete_batches()
        new = self._new_batches(batches)
        external_before, external_before_rows = self.external, self.external_rows
        if new is None:
            self.reset()
            new = batches
            before = None
        else:
            if len(self.pieces) >= MAX_PIECES:
                self._consolidate()
            before = self._kept()
        added = empty_fingerprints(self.spark)
        added_rows = None if before is None else _on_driver(new)
        if new:
            piece = self.spark.read.schema(FINGERPRINT).parquet(*(str(b.path) for b in new))
            added = piece.persist(KEPT)
            self.pieces.append(added)
        self.records = {b.path.name: int(b.manifest["records"]) for b in batches}
        self.batches_read = len(new)
        self.external_rows = self._read_external()
        self.external = (
            None
            if self.external_rows is None
            else self.spark.createDataFrame(self.external_rows, FINGERPRINT)
        )
        kept = self._kept()
        return Fingerprints(
            kept=kept,
            external=self.external,
            before=before,
            added=added,
            external_before=None if before is None else external_before,
            count=self._counted(kept, added, before is None),
            displaced=self.store.displaced(),
            audited_from={r.key: r.start for r in merged_ranges(batches)},
            added_rows=added_rows,
            external_rows=self.external_rows,
            external_before_rows=None if before is None else external_before_rows,
        )

    def _counted(self, kept: DataFrame, added: DataFrame, everything: bool) -> int:
        """The rows of kept and external, each kept piece cached by the count: a piece
        whose files a merge removes before it is cached could not be read again."""
        external = 0 if self.external_rows is None else self.external_rows.num_rows
        if everything:
            return kept.count() + external
        # Only the new piece is scanned; the kept batches' rows are their manifests'.
        added.count()
        return sum(self.records.values()) + external

    def _new_batches(self, batches: list[Batch]) -> list[Batch] | None:
        """The batches to read on top of the kept ones; None when the kept rows are no
        longer exactly those of kept batches (read everything)."""
        names = {b.path.name for b in batches}
        gone = set(self.records) - names
        new = []
        for batch in batches:
            name = batch.path.name
            if name in self.records:
                continue
            replaces = set(batch.manifest.get("replaces", ()))
            if not replaces:
                new.append(batch)
                continue
            # A replacement: fine only if it replaces kept batches with the same rows (a
            # re-read's rewrite has others, whatever their count).
            if not replaces <= set(self.records) or batch.manifest.get("rewritten"):
                return None
            if int(batch.manifest["records"]) != sum(self.records[r] for r in replaces):
                return None
            gone -= replaces
        return None if gone else new

    def _kept(self) -> DataFrame:
        if not self.pieces:
            return empty_fingerprints(self.spark)
        kept = reduce(DataFrame.unionByName, self.pieces)
        # Each piece is at least one task in every scan of the fingerprints (a run has
        # three); coalescing (no shuffle; never more partitions than there are) keeps a
        # scan at a few tasks per core.
        return kept.coalesce(2 * self.spark.sparkContext.defaultParallelism)

    def _consolidate(self) -> None:
        whole = self._kept().persist(KEPT)
        whole.count()  # materialized before the pieces it is made of are freed
        for piece in self.pieces:
            piece.unpersist()
        self.pieces = [whole]

    def _read_external(self) -> pa.Table | None:
        """Read the external snapshots on the driver (the audit writes them from there, whole),
        so the last load's stay exactly what they were when the audit rewrites the files;
        conformed once here, for the frame and for a small cycle's driver work."""
        paths = self.store.external_snapshots()
        if not paths:
            return None
        return conformed(pq.read_table(paths, schema=ARROW_FINGERPRINT))


def _on_driver(batches: list[Batch]) -> pa.Table | None:
    """The rows of `batches` read on the driver (as Spark reads a batch's folder: its data
    files), for a small cycle (analyze/small_cycle.py); None when they are more than
    FEW_ADDED."""
    if sum(int(b.manifest["records"]) for b in batches) > FEW_ADDED:
        return None
    files = [str(f) for b in batches for f in part_files(b.path)]
    if not files:
        return ROWS.empty_table()
    return conformed(pq.read_table(files, schema=ARROW_FINGERPRINT))
