"""Fingerprints on disk, in batches (batches.py) whose rename is their commit.

`<state_dir>/fingerprints/` holds the committed batches. A batch is written into a hidden temp
dir (a name starting with '.', which Spark and this module skip), its files and manifest
fsynced, then renamed to its final name. A job killed at any point has either renamed its
batch (its range is audited, its fingerprints are there) or not (neither), so each range is
audited exactly once. Leftover hidden dirs, and batches a committed rewrite replaced
(rewrite.py), are removed under the writer lock at the start.

A batch whose manifest or a part file no longer reads (damaged on disk) is moved aside as
`damaged-<name>` under the writer lock; its offsets are then audited again.

File external sinks (SQLite, DuckDB) are snapshots, `external/<pipeline>.parquet`, each
replaced atomically. A JDBC sink's new rows are a batch like a Kafka range's; its manifest's
`external` names, per pipeline, the sink (a hash of what shapes its rows), its topic and the
position read up to (`upto`), so the position commits with the rows (audit/jdbc_audit.py).
Run audit, compact and FingerprintStore.load's reads from one process one after another: a
compaction removes files a lazy DataFrame from an earlier load may still want to read.

`FingerprintStore(state_dir)` is the store (as dgm.contracts.samples.SampleStore is the
samples'); what needs no state dir (a Batch and what manifests say) is batches.py's.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from dgm.config.pipelines import MessageIdRule
from dgm.contracts.fingerprints import DISPLACED as ARROW_DISPLACED
from dgm.contracts.fingerprints import DISPLACED_DIR, FINGERPRINTS_DIR
from dgm.contracts.fingerprints import FINGERPRINT as ARROW_FINGERPRINT
from dgm.contracts.samples import Key
from dgm.util.durable import fsync
from spark_jobs.audit.batches import (
    BATCH_NAME,
    MANIFEST,
    Batch,
    all_batches,
    new_manifest,
    next_name,
    reaudited,
    records_of,
)
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.schemas import DISPLACED, FINGERPRINT

log = logging.getLogger(__name__)

EXTERNAL_DIR = "external"


class FingerprintStore:
    """The fingerprint batches and external snapshots under one state dir."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self.folder = self.state_dir / FINGERPRINTS_DIR
        self.external_dir = self.folder / EXTERNAL_DIR

    @contextmanager
    def writer_lock(self) -> Iterator[None]:
        """One writer of fingerprints at a time (audit, compact); leftovers removed on entry."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self.recover()
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def recover(self) -> list[str]:
        """Remove what a killed writer left: hidden temp/trash dirs and replaced batches.
        Call only under `writer_lock` (another writer's temp dir is not a leftover)."""
        folder = self.folder
        replaced = {n for b in all_batches(folder) for n in b.manifest.get("replaces", ())}
        removed = []
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            hidden = path.name.startswith(".") and path.is_dir()
            if hidden or path.name in replaced:
                shutil.rmtree(path)
                removed.append(path.name)
        for path in self.external_dir.glob(".*.tmp"):
            path.unlink()
            removed.append(f"{EXTERNAL_DIR}/{path.name}")
        self.set_aside_damaged()
        return removed

    def damaged_ranges(self) -> dict[str, list[OffsetRange]]:
        """Damaged batch name -> the ranges its manifest names, for those not audited again
        yet (a batch whose manifest does not read cannot be: set_aside_damaged warned)."""
        folder = self.folder
        done = reaudited(self.complete_batches())
        found: dict[str, list[OffsetRange]] = {}
        for path in sorted(folder.glob("damaged-batch-*")) if folder.is_dir() else []:
            name = path.name.removeprefix("damaged-")
            if name in done:
                continue
            try:
                manifest = json.loads((path / MANIFEST).read_text())
            except (OSError, ValueError):
                continue
            found[name] = [
                OffsetRange(r["topic"], r["partition"], r["start"], r["end"])
                for r in manifest["ranges"]
                if r["end"] > r["start"]
            ]
        return found

    def set_aside_damaged(self) -> list[str]:
        """Move batches whose manifest or a Parquet part does not read (damaged on disk) to
        `damaged-<name>`: kept for a look, out of every read. Their ranges are no longer
        audited positions, so the next audit reads them again from Kafka where it still holds
        them. Call under `writer_lock`."""
        folder = self.folder
        moved = []
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            if not BATCH_NAME.fullmatch(path.name) or not (path / MANIFEST).is_file():
                continue
            try:
                json.loads((path / MANIFEST).read_text())
                for part in path.glob("*.parquet"):
                    pq.read_metadata(part)
            except (OSError, ValueError, pa.ArrowException) as error:
                aside = path.with_name(f"damaged-{path.name}")
                os.rename(path, aside)
                fsync(folder)
                log.warning(
                    "fingerprint batch %s is damaged (%s): moved to %s; its offsets are "
                    "audited again from Kafka where Kafka still holds them (not if its "
                    "manifest is lost)",
                    path,
                    error,
                    aside,
                )
                moved.append(path.name)
        return moved

    def complete_batches(self) -> list[Batch]:
        """Committed batches, oldest first, without those a committed compaction replaced."""
        batches = all_batches(self.folder)
        replaced = {name for b in batches for name in b.manifest.get("replaces", ())}
        return [b for b in batches if b.path.name not in replaced]

    def audited_positions(self) -> dict[Key, int]:
        """Per topic-partition the end of what complete batches have audited, and damaged ones
        whose offsets are audited again apart (damaged_ranges), so they are not read twice."""
        ends: dict[Key, int] = {}
        for batch in self.complete_batches():
            for r in batch.ranges:
                key = (r["topic"], r["partition"])
                ends[key] = max(ends.get(key, r["end"]), r["end"])
        for pending in self.damaged_ranges().values():
            for d in pending:
                ends[d.key] = max(ends.get(d.key, d.end), d.end)
        return ends

    def write_batch(
        self,
        spark: SparkSession,
        frame: DataFrame,
        ranges: Sequence[OffsetRange],
        id_rules: Mapping[str, MessageIdRule],
        replaces: Sequence[str] = (),
        topic_ids: Mapping[str, str] | None = None,
        reaudits: Sequence[str] = (),
        external: Mapping[str, Mapping[str, Any]] | None = None,
        expected: Mapping[str, str] | None = None,
        displaced: DataFrame | None = None,
        rewritten: bool = False,
        files: Sequence[Path] | None = None,
    ) -> Batch:
        """Write `frame` (FINGERPRINT rows of `ranges`, and of the JDBC sinks `external`
        names: pipeline -> {"topic", "sink", "upto"}) as one committed batch; call under
        `writer_lock`. `files`: Parquet part files in this store's folder that hold exactly
        `frame`'s rows, moved into the batch instead of writing it again (audit/scratch.py).
        The manifest counts the records per range (and per external entry) from what was
        written; `expected`: pipeline -> the predicate its source records were marked
        under."""
        folder = self.folder
        temp = folder / f".tmp-{uuid.uuid4().hex}"
        if files is None:
            frame.select(*(f.name for f in FINGERPRINT.fields)).write.parquet(str(temp))
        else:
            temp.mkdir()
            for path in files:
                os.rename(path, temp / path.name)
        manifest = new_manifest(temp, ranges, id_rules, replaces, topic_ids, reaudits)
        manifest["expected"] = dict(sorted((expected or {}).items()))
        if displaced is not None:
            aside = temp / DISPLACED_DIR
            displaced.select(*(f.name for f in DISPLACED.fields)).write.parquet(str(aside))
            manifest["displaced"] = spark.read.schema(DISPLACED).parquet(str(aside)).count()
            for path in aside.iterdir():
                fsync(path)
        # Rows other than the replaced batches' own (a re-read's rewrite): readers that keep
        # fingerprints read everything again (audit/incremental_load.py).
        manifest["rewritten"] = rewritten
        if external:
            manifest["external"] = {
                name: {**entry, "records": records_of(manifest, entry["topic"])}
                for name, entry in sorted(external.items())
            }
        (temp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        for path in temp.iterdir():
            fsync(path)
        fsync(temp)
        final = folder / next_name(folder)
        os.rename(temp, final)  # the commit
        fsync(folder)
        return Batch(final, manifest)

    def external_snapshots(self) -> list[str]:
        """The paths of the external sinks' snapshots."""
        external = self.external_dir
        return sorted(str(p) for p in external.glob("*.parquet")) if external.is_dir() else []

    def displaced(self) -> pa.Table:
        """Every complete batch's displaced fingerprints (DISPLACED), read on the driver:
        they are few."""
        folders = [b.path / DISPLACED_DIR for b in self.complete_batches()]
        tables = [pq.read_table(f, schema=ARROW_DISPLACED) for f in folders if f.is_dir()]
        return pa.concat_tables(tables) if tables else ARROW_DISPLACED.empty_table()

    def load(self, spark: SparkSession) -> DataFrame:
        """Every complete batch's fingerprints and every external snapshot, FINGERPRINT
        columns."""
        paths = [str(b.path) for b in self.complete_batches()] + self.external_snapshots()
        if not paths:
            return empty_fingerprints(spark)
        return spark.read.schema(FINGERPRINT).parquet(*paths)

    def write_external(self, pipeline: str, table: pa.Table) -> Path:
        """Replace `pipeline`'s external sink snapshot atomically (temp file, fsync, rename).
        `table` has the FINGERPRINT columns; it is cast to ARROW_FINGERPRINT."""
        folder = self.external_dir
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"{pipeline}.parquet"
        temp = folder / f".{pipeline}.{uuid.uuid4().hex}.tmp"
        try:
            pq.write_table(table.select(ARROW_FINGERPRINT.names).cast(ARROW_FINGERPRINT), temp)
            fsync(temp)
            os.replace(temp, final)
        finally:
            temp.unlink(missing_ok=True)
        fsync(folder)
        return final

    def remove_external_except(self, pipelines: set[str]) -> list[str]:
        """Drop snapshots of pipelines that no longer have an external sink configured."""
        stale = [p for p in self.external_dir.glob("*.parquet") if p.stem not in pipelines]
        for path in stale:
            path.unlink()
        return [p.stem for p in stale]


def empty_fingerprints(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([], FINGERPRINT)
