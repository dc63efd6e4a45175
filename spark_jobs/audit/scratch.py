"""The audit's read_uncommitted fingerprints, written once: each chunk of offset ranges is
read, fingerprinted and written straight to Parquet in a hidden scratch folder of the
fingerprint store, then counted per partition from its files on the driver (written.py).

Caching each chunk, counting it with a Spark job and writing the batch from the cache took
about twice the engine's floor (bench/HISTORY.md, "Audit: throughput against the engine's
floor"). Now a batch that needs nothing more (no transactions to mark, no ids to drop)
adopts the scratch files as they are (FingerprintStore.write_batch's `files`); otherwise one
job reads them back. A killed audit leaves the folder hidden, and the store's next writer
removes it (FingerprintStore.recover).
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from dgm.contracts.fingerprints import COORDINATES
from dgm.contracts.samples import Key
from spark_jobs.audit.written import part_files, written
from spark_jobs.schemas import FINGERPRINT


class Scratch:
    """A hidden folder in `store_folder` holding one Parquet folder per chunk written."""

    def __init__(self, store_folder: Path) -> None:
        self.folder = store_folder / f".scratch-{uuid.uuid4().hex}"
        self.folder.mkdir(parents=True)
        self.chunks: list[Path] = []

    def write(self, frame: DataFrame) -> dict[Key, int]:
        """Write `frame` (FINGERPRINT rows) as the next chunk; its rows per partition."""
        chunk = self.folder / f"chunk-{len(self.chunks):05d}"
        frame.select(*(f.name for f in FINGERPRINT.fields)).write.parquet(str(chunk))
        self.chunks.append(chunk)
        return {key: seen.rows for key, seen in written(part_files(chunk)).items()}

    def write_aborted(self, aborted: DataFrame) -> int:
        """Write the coordinates `aborted` (aborted_marking.aborted_offsets) once; how many."""
        folder = self.folder / "aborted"
        aborted.select(*COORDINATES).write.parquet(str(folder))
        return sum(pq.ParquetFile(f).metadata.num_rows for f in part_files(folder))

    def aborted(self, spark: SparkSession) -> DataFrame:
        """The coordinates write_aborted wrote."""
        return spark.read.parquet(str(self.folder / "aborted"))

    def files(self) -> list[Path]:
        """Every chunk's part files; Spark names each job's files apart, so they never clash
        in one folder."""
        return [f for chunk in self.chunks for f in part_files(chunk)]

    def frame(self, spark: SparkSession) -> DataFrame:
        """Every row written so far."""
        return spark.read.schema(FINGERPRINT).parquet(*(str(c) for c in self.chunks))

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
