"""The cycle's stream records and relinked partitions computed on the driver
(spark_jobs.analyze.cycle_streams) equal what the Spark passes give over the same rows
(passes.stream_records with the id join over kept and new rows; `relinks` below), on generated
rows with the awkward cases: ids held by several source records or by aborted ones, sink
copies arriving before their source record, dgm-src beside the id join, unidentified and
aborted records, a sampled sink and an external one."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.analyze import lineage
from spark_jobs.analyze.context import Context
from spark_jobs.analyze.cycle_streams import cycle_relinks, cycle_rows, cycle_stream_records
from spark_jobs.analyze.passes import stream_records
from spark_jobs.schemas import FINGERPRINT
from tests.support.fingerprint_rows import fp
from tests.support.id_lineage import ROUTES
from tests.support.strength import by_strength

pytestmark = pytest.mark.spark

CTX = ROUTES  # k from s and s2, k3 from s3; ks sampled
TOPICS = ("s", "s2", "s3", "k", "k3", "ks", "external:p:tbl", "other")


def generated(rng: np.random.Generator, size: int) -> list[tuple[Any, ...]]:
    """Rows of every topic, ids drawn from a pool small enough that ids repeat within and
    across topics; some stamped with a producer session, some with dgm-src."""
    rows, next_offset = [], dict.fromkeys(((t, p) for t in TOPICS for p in range(2)), 0)
    for _ in range(size):
        topic, partition = str(rng.choice(TOPICS)), int(rng.integers(2))
        offset = next_offset[(topic, partition)]
        next_offset[(topic, partition)] += int(rng.integers(1, 3))
        draw = rng.random(5)
        message_id = None if draw[0] < 0.05 else f"id-{rng.integers(size // 2)}"
        stamped = draw[1] < 0.3
        lineage = f"s/{rng.integers(2)}/{rng.integers(50)}" if draw[2] < 0.15 else None
        rows.append(
            fp(
                topic, partition, offset, message_id, int(rng.integers(600)),
                producer=f"pr-{rng.integers(3)}" if stamped else None,
                seq=int(rng.integers(100)) if stamped else None,
                lineage=lineage,
                committed=bool(draw[3] >= 0.1),
            )
        )  # fmt: skip
    return rows


def relinks(
    kept: DataFrame, added: DataFrame, ctx: Context, sinks: Collection[str]
) -> frozenset[tuple[str, int]]:
    """cycle_relinks' rule in Spark, with lineage.py's own pieces (what the engine ran before
    it moved to the driver)."""
    routes = lineage.routes_among(ctx, sinks)
    if not routes:
        return frozenset()
    copies = kept.where(lineage._unstamped(routes)).select(
        F.col("topic").alias("sink"), "partition", "message_id"
    )
    sources = lineage._held(added, routes).select("sink", "message_id")
    found = (
        copies.join(sources, ["sink", "message_id"], "left_semi")
        .select("sink", "partition")
        .distinct()
        .toArrow()
    )
    return frozenset(zip(found["sink"].to_pylist(), found["partition"].to_pylist(), strict=True))


def canonical(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


@pytest.mark.parametrize("seed", range(by_strength(2, 12)))
def test_the_driver_gives_what_the_spark_passes_give(spark: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = generated(rng, 400)
    width = len(FINGERPRINT.fields)
    rows = [(*r, *(None,) * (width - len(r))) for r in rows]
    added_mask = rng.random(len(rows)) < 0.4
    kept = spark.createDataFrame(
        [r for r, a in zip(rows, added_mask, strict=True) if not a], FINGERPRINT
    )
    added = spark.createDataFrame(
        [r for r, a in zip(rows, added_mask, strict=True) if a], FINGERPRINT
    )
    collected = cycle_rows(kept, added, CTX)
    for unstamped in (frozenset({"k", "k3"}), frozenset({"k"}), frozenset()):
        held = kept.unionByName(added)
        wanted = stream_records(added, CTX, held, unstamped).toArrow()
        found = cycle_stream_records(collected, CTX, unstamped)
        assert found.num_rows == wanted.num_rows, unstamped
        assert canonical(found) == canonical(wanted.cast(found.schema)), unstamped
        assert cycle_relinks(collected, CTX, unstamped) == relinks(kept, added, CTX, unstamped)
    # The draw places some copies by the id join and relinks some kept ones.
    assert cycle_relinks(collected, CTX, {"k", "k3"}), seed
