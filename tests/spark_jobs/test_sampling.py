"""Which fingerprints a sample keeps, in Spark: about 1 in N ids, an id's copies on every
topic together, nested shares, unidentified records by their coordinates."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from spark_jobs.sampling import kept

IDS = 100_000


def _records(spark: Any) -> Any:
    """Every id of IDS on two topics, and IDS unidentified records on a third."""
    ids = spark.range(IDS).select(
        F.concat(F.lit("order-"), F.col("id").cast("string")).alias("message_id")
    )
    coordinates = F.lit(0).alias("partition"), F.monotonically_increasing_id().alias("offset")
    both = [ids.select(F.lit(t).alias("topic"), *coordinates, "message_id") for t in ("in", "out")]
    unidentified = spark.range(IDS).select(
        F.lit("raw").alias("topic"), F.lit(0).alias("partition"), F.col("id").alias("offset"),
        F.lit(None).cast("string").alias("message_id"),
    )  # fmt: skip
    return both[0].unionByName(both[1]).unionByName(unidentified).cache()


def test_a_sample_keeps_about_its_share_of_ids_with_every_copy_and_nests(spark: Any) -> None:
    records = _records(spark)
    try:
        at = {n: kept(records, {"in": n, "out": n, "raw": n}) for n in (10, 100)}
        for n, frame in at.items():
            per_topic = {r["topic"]: r["count"] for r in frame.groupBy("topic").count().collect()}
            # Binomial(IDS, 1/n): within 5 standard deviations.
            spread = 5 * (IDS / n) ** 0.5
            assert all(abs(c - IDS / n) < spread for c in per_topic.values()), (n, per_topic)
            ids = frame.where("message_id IS NOT NULL").groupBy("message_id").count()
            assert ids.where("count != 2").count() == 0  # both copies, or neither
        tens = at[10].select("topic", "message_id", "offset")
        assert at[100].select("topic", "message_id", "offset").subtract(tens).count() == 0
        # A topic the sample does not name keeps every record.
        assert kept(records, {"in": 10}).where("topic = 'out'").count() == IDS
        assert kept(records, {}).count() == 3 * IDS
    finally:
        records.unpersist()
