"""The arrival columns in stored fingerprints: batches, snapshots and displaced rows written
before the columns existed read them as null; a rewrite keeps them."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import functions as F

from dgm.contracts.fingerprints import DISPLACED, DISPLACED_DIR
from dgm.contracts.fingerprints import FINGERPRINT as ARROW_FINGERPRINT
from spark_jobs.audit.incremental_load import KeptFingerprints
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.audit.rewrite import replace_batches
from spark_jobs.audit.store import FingerprintStore
from spark_jobs.audit.written import part_files
from tests.support.stored_fingerprints import NOW, RULES, rows

ARRIVAL = ["arrived_at", "arrival_resolution_us"]


def older(path: Path) -> None:
    """`path` (a Parquet file) as a writer before the arrival columns wrote it."""
    pq.write_table(pq.read_table(path).drop_columns(ARRIVAL), path, coerce_timestamps="us")
    path.with_name(f".{path.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum, now stale


def arrivals(frame: Any) -> dict[int, tuple[Any, Any]]:
    picked = frame.select("offset", F.unix_micros("arrived_at"), "arrival_resolution_us")
    return {r[0]: (r[1], r[2]) for r in picked.collect()}


def test_older_fingerprints_read_null_arrivals_and_a_rewrite_keeps_them(
    spark: Any, tmp_path: Path
) -> None:
    store = FingerprintStore(tmp_path)
    arrived = NOW - timedelta(seconds=1)
    with store.writer_lock():
        old = store.write_batch(
            spark, rows(spark, "t", range(0, 3), NOW), [OffsetRange("t", 0, 0, 3)], RULES
        )
        fresh = rows(spark, "t", range(3, 6), NOW)
        fresh = fresh.withColumn("arrived_at", F.lit(arrived)).withColumn(
            "arrival_resolution_us", F.lit(2_000_000).cast("long")
        )
        new = store.write_batch(spark, fresh, [OffsetRange("t", 0, 3, 6)], RULES)
    for path in part_files(old.path):
        older(path)
    aside = old.path / DISPLACED_DIR
    aside.mkdir()
    displaced = {f.name: [None] for f in DISPLACED} | {"topic": ["t"], "partition": [0]}
    displaced |= {"offset": [9], "committed": [True], "overwritten": [False], "detected_at": [NOW]}
    pq.write_table(
        pa.table(displaced, schema=DISPLACED).drop_columns(ARRIVAL), aside / "part-0.parquet"
    )
    sink = store.external_dir / "p.parquet"
    store.external_dir.mkdir(parents=True, exist_ok=True)
    full = {f.name: [None] for f in ARROW_FINGERPRINT} | {"topic": ["k"], "partition": [0]}
    full |= {"offset": [7], "committed": [True]}
    pq.write_table(pa.table(full, schema=ARROW_FINGERPRINT).drop_columns(ARRIVAL), sink)

    at_us = int(arrived.timestamp() * 1_000_000)
    want: dict[int, tuple[Any, Any]] = {o: (None, None) for o in (0, 1, 2)}
    want |= {o: (at_us, 2_000_000) for o in (3, 4, 5)}
    assert arrivals(store.load(spark).where(F.col("topic") == "t")) == want
    loaded = KeptFingerprints(spark, tmp_path).load()
    assert arrivals(loaded.kept) == want
    assert loaded.external is not None and arrivals(loaded.external) == {7: (None, None)}
    assert store.displaced().select(ARRIVAL).to_pylist() == [dict.fromkeys(ARRIVAL)]

    # Merges, compactions and re-reads' rewrites all write through replace_batches.
    with store.writer_lock():
        merged = replace_batches(store, spark, [old, new])
    assert arrivals(spark.read.parquet(str(merged.path))) == want
    assert arrivals(store.load(spark).where(F.col("topic") == "t")) == want
    assert store.displaced().select(ARRIVAL).to_pylist() == [dict.fromkeys(ARRIVAL)]
