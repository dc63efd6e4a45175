"""The engine's delivery-latency histogram equals the DuckDB reference's on generated
fingerprints (docs/design.md, "Delivery latency"): a pipeline that loses, duplicates and
aborts (tests/support/generated_fingerprints.py), with arrival times drawn over five decades,
some unknown, and sink copies readable before their source record."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from spark_jobs.analysis_input import Fingerprints
from spark_jobs.analyze.engine import Engine
from spark_jobs.analyze.latency_tables import histogram
from tests.support import engine_run, reference
from tests.support.generated_fingerprints import pipeline

pytestmark = pytest.mark.spark

# The reference: per checked id with a committed sink copy, its first checked source record
# (by timestamp, topic, partition, offset) against the id's first readable sink copy.
LATENCY = """
WITH checked AS (
    SELECT s.* FROM source s JOIN committed c ON s.topic = c.topic AND s."partition" = c."partition"
    WHERE s.committed AND s.message_id IS NOT NULL AND s.timestamp < $cutoff
      AND s."offset" < c.committed_offset
), copies AS (
    SELECT message_id, min(arrived_at) AS copy_at FROM sink
    WHERE committed AND message_id IS NOT NULL GROUP BY message_id
), first AS (
    SELECT k.* FROM checked k WHERE k.message_id IN (SELECT message_id FROM copies)
    QUALIFY row_number() OVER (
        PARTITION BY k.message_id ORDER BY k.timestamp, k.topic, k."partition", k."offset"
    ) = 1
)
SELECT epoch_us(f.timestamp) // 60000000 * 60000000 AS window_us,
       floor(4 * log2(greatest(epoch_us(c.copy_at) - epoch_us(f.arrived_at), 1)))::BIGINT
           AS bucket,
       count(*) AS records
FROM first f JOIN copies c USING (message_id)
WHERE f.arrived_at IS NOT NULL AND c.copy_at IS NOT NULL
GROUP BY ALL ORDER BY ALL
"""


def with_arrivals(table: pa.Table, rng: np.random.Generator, spread_s: float) -> pa.Table:
    """`table` with arrived_at = its timestamp + a log-uniform delay up to `spread_s` (some
    before it), 2% unknown."""
    n = table.num_rows
    stamps = table["timestamp"].cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_numpy()
    delay = 10 ** rng.uniform(-3, np.log10(spread_s), n) * 1e6
    delay[rng.random(n) < 0.05] *= -1  # readable "before": one interpolated sampling interval
    arrived = pa.array((stamps + delay).astype(np.int64), mask=rng.random(n) < 0.02)
    index = table.schema.get_field_index("arrived_at")
    return table.set_column(index, "arrived_at", arrived.cast(pa.timestamp("us", tz="UTC")))


def test_the_latency_histogram_equals_the_reference(spark: Any) -> None:
    rng = np.random.default_rng(38)
    generated = pipeline("p", 20_000, 3, seed=38, topics=("s", "k"))
    source = with_arrivals(generated.source, rng, 2.0)
    sink = with_arrivals(generated.sink, rng, 100.0)
    commits = {
        ("p", r["topic"], r["partition"]): r["committed_offset"]
        for r in generated.committed.to_pylist()
    }
    engine = Engine()
    now = generated.cutoff  # grace 0: the cutoff is now
    engine.cycle(
        engine_run.config(),
        Fingerprints(spark.createDataFrame(pa.concat_tables([source, sink]))),
        commits,
        now,
    )
    assert engine.state is not None
    found = histogram(engine.state.counts).sort_values(["window_us", "bucket"])
    expected = reference.query(
        LATENCY, {"cutoff": now}, source=source, sink=sink, committed=generated.committed
    )
    want = list(
        zip(*(expected[c].to_pylist() for c in ("window_us", "bucket", "records")), strict=True)
    )
    got = list(zip(found["window_us"], found["bucket"], found["records"].astype(int), strict=True))
    assert len(want) > 50 and sum(r for _, _, r in want) > 10_000
    assert [tuple(map(int, g)) for g in got] == [tuple(map(int, w)) for w in want]
    assert int(pc.sum(expected["records"]).as_py()) == int(found["records"].sum())
