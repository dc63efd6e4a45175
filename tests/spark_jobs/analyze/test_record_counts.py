"""The partitions' record counts (record_counts.py), in Spark and on the driver, against a
plain count of the rows: aborted records, rows without a time (not in any window), times
before 1970 (windows floored, not truncated toward zero) and a window's last micro."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from spark_jobs.analyze.output import SCHEMA
from spark_jobs.analyze.record_counts import partition_records, partition_records_in
from spark_jobs.schemas import FINGERPRINT

pytestmark = pytest.mark.spark

WINDOW_US = 60_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _rows(count: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    base = int((datetime(2026, 11, 29, tzinfo=UTC) - EPOCH).total_seconds() * 1e6)
    micros = base + rng.integers(-3 * WINDOW_US, 3 * WINDOW_US, count)
    micros[:5] = [-1, -WINDOW_US, -WINDOW_US - 1, 0, base - base % WINDOW_US - 1]
    stamps = [EPOCH + timedelta(microseconds=int(m)) for m in micros]
    untimed = rng.random(count) < 0.05
    columns: dict[str, Any] = {f.name: [None] * count for f in FINGERPRINT.fields}
    columns |= {
        "topic": [f"t{i}" for i in rng.integers(0, 2, count)],
        "partition": rng.integers(0, 3, count).tolist(),
        "offset": list(range(count)),
        "timestamp": [None if u else s for s, u in zip(stamps, untimed, strict=True)],
        "committed": (rng.random(count) >= 0.1).tolist(),
    }
    schema = pa.schema([(f.name, _arrow(f.dataType.simpleString())) for f in FINGERPRINT.fields])
    return pa.table(columns, schema=schema)


def _arrow(kind: str) -> pa.DataType:
    plain = {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64()}
    if kind in plain:
        return plain[kind]
    if kind == "boolean":
        return pa.bool_()
    if kind == "timestamp":
        return pa.timestamp("us", tz="UTC")
    return pa.list_(pa.string())


def _expected(rows: pa.Table) -> Counter[tuple[Any, ...]]:
    found: Counter[tuple[Any, ...]] = Counter()
    for r in rows.to_pylist():
        if r["timestamp"] is None:
            continue
        micros = (r["timestamp"] - EPOCH) // timedelta(microseconds=1)
        window = micros // WINDOW_US * WINDOW_US  # floor division
        key = (r["topic"], r["partition"], window)
        found[(*key, "records")] += int(r["committed"])
        found[(*key, "aborted")] += int(not r["committed"])
    return found


def _counted(table: pa.Table) -> Counter[tuple[Any, ...]]:
    assert table.schema == SCHEMA
    found: Counter[tuple[Any, ...]] = Counter()
    for r in table.to_pylist():
        assert r["kind"] == "partition"
        key = (r["topic"], r["partition"], r["window_us"])
        found[(*key, "records")] += r["records"]
        found[(*key, "aborted")] += r["aborted"]
    return found


def test_spark_and_the_driver_count_what_the_rows_hold(spark: Any) -> None:
    rows = _rows(3_000, seed=7)
    expected = _expected(rows)
    assert any(key[2] < 0 for key in expected)  # windows before 1970 are there
    on_driver = partition_records_in(rows, WINDOW_US)
    in_spark = partition_records(spark.createDataFrame(rows, FINGERPRINT), WINDOW_US).toArrow()
    assert _counted(on_driver) == expected
    assert _counted(in_spark.cast(SCHEMA)) == expected
    # One row per key: a cycle's counts are summed per key with the kept ones.
    assert on_driver.num_rows == len({key[:3] for key in expected})
    empty = partition_records_in(rows.slice(0, 0), WINDOW_US)
    assert empty.num_rows == 0 and empty.schema == SCHEMA
