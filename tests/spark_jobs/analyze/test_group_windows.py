"""The group_status table works out every partition's window at once (group_windows.py); the
rules' reference is one partition's list of samples (summarize, evaluate, catch_up). On
generated samples with the awkward cases (rewinds, repeated offsets, equal sample times,
negative lag, unknown lag in seconds, fewer samples than the window, a partition's offset
equal to the one before it), each table row must say what the reference says."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest

from dgm.contracts.sample_schemas import SCHEMAS
from spark_jobs.analyze.group_status import Sample, evaluate, group_status, summarize
from spark_jobs.analyze.lag_seconds import catch_up

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _partition(rng: random.Random, group: str, partition: int) -> list[dict[str, Any]]:
    """One partition's samples, oldest first."""
    rows, at, committed = [], T0, rng.choice([0, 7])  # 7: often the offset before it too
    for _ in range(rng.randint(1, 12)):
        at += timedelta(milliseconds=rng.choice([0, 500, 10_000]))  # 0: two samples at once
        committed = max(committed + rng.choice([0, 0, 3, 10, -4]), 0)
        lag = rng.choice([-2, 0, 0, 5, 12, 40])
        lag_s = rng.choice([math.nan, 0.0, 1.5, 30.0])
        rows.append(
            {"sampled_at": at, "cluster_id": "c", "group_id": group, "topic": "t",
             "partition": partition, "committed_offset": committed, "group_state": "Stable",
             "member_id": rng.choice(["m", None]), "high_watermark": committed + lag + 3,
             "lso": committed + lag, "lag_from_hw": lag + 3, "lag_from_lso": lag,
             "group_type": "classic", "share_lag": None,
             "lag_s": lag_s, "lag_s_at_least": rng.random() < 0.3}
        )  # fmt: skip
    return rows


def _expected(rows: list[dict[str, Any]], size: int) -> dict[str, Any]:
    window = rows[-size:]

    def samples(extra: int) -> list[Sample]:
        return [
            Sample(r["sampled_at"], r["committed_offset"], r["lso"] + extra, bool(r["member_id"]))
            for r in window
        ]

    by_lso, by_hw = summarize(samples(0), size), summarize(samples(3), size)
    status, reason = evaluate(by_lso)
    pace = catch_up(
        [r["sampled_at"] for r in window],
        [r["committed_offset"] for r in window],
        [r["lso"] for r in window],
        [r["lag_s"] for r in window],
    )
    moved = [r for i, r in enumerate(rows)
             if i == 0 or r["committed_offset"] != rows[i - 1]["committed_offset"]]  # fmt: skip
    newest = window[-1]
    known = [r["lag_s"] for r in (window[0], newest)]
    return {
        "status": status.value, "reason": reason, "status_from_hw": evaluate(by_hw)[0].value,
        "samples": len(window), "window_start": window[0]["sampled_at"],
        "window_end": newest["sampled_at"], "committed_start": window[0]["committed_offset"],
        "committed_end": newest["committed_offset"], "lso_lag_start": by_lso.lag_start,
        "lso_lag_end": by_lso.lag_end, "hw_lag_end": by_hw.lag_end,
        "lag_s_start": None if math.isnan(known[0]) else known[0],
        "lag_s_end": None if math.isnan(known[1]) else known[1],
        "lag_s_at_least": newest["lag_s_at_least"], "lag_s_trend": pace.lag_s_trend,
        "consume_rate": pace.consume_rate, "produce_rate": pace.produce_rate,
        "catch_up_s": pace.catch_up_s, "catching_up": pace.catching_up,
        "last_commit_at": moved[-1]["sampled_at"], "member_id": newest["member_id"],
    }  # fmt: skip


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("size", [2, 4, 10])
def test_every_partition_row_is_the_reference_on_its_own_samples(seed: int, size: int) -> None:
    rng = random.Random(seed)
    partitions = {
        (f"g{g}", p): _partition(rng, f"g{g}", p)
        for g in range(4)
        for p in range(rng.randint(1, 9))
    }
    # Interleaved as collector cycles would write them; each partition's own order kept.
    queues = [list(rows) for rows in partitions.values()]
    given = []
    while queues:
        queue = rng.choice(queues)
        given.append(queue.pop(0))
        queues = [q for q in queues if q]
    schema = SCHEMAS["group_offsets"].append(pa.field("lag_s", pa.float64()))
    schema = schema.append(pa.field("lag_s_at_least", pa.bool_()))
    table = group_status(pa.Table.from_pylist(given, schema), size)
    got = {(r["group_id"], r["partition"]): r for r in table.to_pylist() if r["topic"]}
    assert set(got) == set(partitions)
    for key, rows in partitions.items():
        expected = _expected(rows, size)
        assert {k: got[key][k] for k in expected} == expected, key
