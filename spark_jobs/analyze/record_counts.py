"""The counts of a topic partition's windows that need no message id: its committed and
aborted records (partition_windows' `records` and `aborted`). Summed where the fingerprints
lie, with no shuffle by id: per_id gave one row per partition window from every one of its
tasks (1.6M of the 2M rows a 10M rebuild collected, summed again on the driver;
bench/HISTORY.md, "The rebuild at 10M: counts where the records lie"). It
still counts the partitions' duplicate copies, which need every record of an id.

Rows are output.SCHEMA rows of kind `partition` (the engine's counts.count_rows reads them
as it reads per_id's); a cycle adds those of the records it added, and takes away those of
the external rows it removed. `partition_records` in Spark, `partition_records_in` on the
driver for a small cycle (small_cycle.py); the same counts (tests hold them equal).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.analyze.output import SCHEMA
from spark_jobs.analyze.passes import OUTPUT, conform

KIND = "partition"
KEYS = ("topic", "partition", "window_us")


def partition_records(fingerprints: DataFrame, window_us: int) -> DataFrame:
    """(SCHEMA) records and aborted per (topic, partition, window) of the timed fingerprints;
    the window as per_id_counts.window_of gives it (its start, floored)."""
    micros = F.unix_micros("timestamp")
    summed = (
        fingerprints.where(F.col("timestamp").isNotNull())
        .groupBy("topic", "partition", (micros - F.pmod(micros, F.lit(window_us))).alias("w"))
        .agg(
            F.sum(F.col("committed").cast("long")).alias("records"),
            F.sum((~F.col("committed")).cast("long")).alias("aborted"),
        )
    )
    given = {
        "kind": F.lit(KIND),
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "window_us": F.col("w"),
        "records": F.col("records"),
        "aborted": F.col("aborted"),
    }
    return summed.select(
        *(given.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in OUTPUT)
    )


def partition_records_in(fingerprints: pa.Table, window_us: int) -> pa.Table:
    """partition_records of fingerprint rows on the driver."""
    timed = fingerprints.filter(pc.is_valid(fingerprints["timestamp"]))
    stamps = timed["timestamp"].cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    micros = stamps.to_numpy()
    committed = timed["committed"]
    keyed = pa.table(
        {
            "topic": timed["topic"],
            "partition": timed["partition"],
            "window_us": pa.array(micros - micros % window_us),  # floored, as numpy's % is
            "records": committed.cast(pa.int64()),
            "aborted": pc.invert(committed).cast(pa.int64()),
        }
    )
    summed = keyed.group_by(list(KEYS)).aggregate([("records", "sum"), ("aborted", "sum")])
    sums = {"records_sum": "records", "aborted_sum": "aborted"}
    renamed = summed.rename_columns([sums.get(n, n) for n in summed.column_names])
    kind = pa.array([KIND] * summed.num_rows, pa.string())
    return conform(renamed.append_column("kind", kind), SCHEMA)
