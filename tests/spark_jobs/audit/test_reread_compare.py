"""The re-read's comparison on Spark, from stored fingerprints and what the offsets hold now
(no Kafka: the records a re-read would find, as rows)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from dgm.contracts.fingerprints import FINGERPRINT
from spark_jobs.audit.reread import (
    NOW_SCHEMA,
    WENT_BACK,
    Reread,
    displaced,
    find_divergences,
)
from spark_jobs.schemas import FINGERPRINT as SPARK_FINGERPRINT

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def stored(spark: Any, ids: Sequence[str | None], first: int = 0) -> Any:
    rows = [
        {f.name: None for f in FINGERPRINT}
        | {"topic": "t", "partition": 0, "offset": first + n, "message_id": i, "committed": True}
        | {"timestamp": T0 + timedelta(seconds=first + n), "key": f"k{first + n}"}
        for n, i in enumerate(ids)
    ]
    return spark.createDataFrame(rows, SPARK_FINGERPRINT)


def held_now(spark: Any, ids: Mapping[int, str | None]) -> Any:
    rows = [
        ("t", 0, o, i, T0 + timedelta(hours=1, seconds=o), f"n{o}", True) for o, i in ids.items()
    ]
    return spark.createDataFrame(rows, NOW_SCHEMA)


def window(start: int, end: int, hw: int) -> Reread:
    return Reread("t", 0, start, end, hw, hw, WENT_BACK)


def test_a_truncated_and_rewritten_tail_diverges_where_the_rewrite_begins(spark: Any) -> None:
    # Audited: a0..a99 then b100..b149. Now: a0..a99, c100..c129, high watermark 130.
    audited = stored(spark, [f"a{n}" for n in range(100)] + [f"b{n}" for n in range(100, 150)])
    now = {**{n: f"a{n}" for n in range(100)}, **{n: f"c{n}" for n in range(100, 130)}}

    def read_now(windows: Sequence[Reread]) -> Any:
        wanted = {o: i for o, i in now.items() if any(w.start <= o < w.end for w in windows)}
        return held_now(spark, wanted)

    # The first window [110, 130) diverges at its lowest offset: read lower until one holds.
    found = find_divergences(lambda _: audited, read_now, [window(110, 130, 130)], {})
    assert found == {("t", 0): 100}
    gone = displaced(audited, read_now([window(100, 130, 130)]), [window(100, 130, 130)])
    rows = {r["offset"]: (r["message_id"], r["now_message_id"]) for r in gone.collect()}
    assert sorted(rows) == list(range(100, 150))
    assert rows[100] == ("b100", "c100") and rows[149] == ("b149", None)


def test_holes_and_equal_ids_are_no_divergence(spark: Any) -> None:
    # Compaction removed offsets 3 and 4; an unidentified record is compared by time and key.
    audited = stored(spark, ["a0", "a1", "a2", "a3", "a4", None])
    unchanged = held_now(spark, {0: "a0", 1: "a1", 2: "a2"}).unionByName(
        spark.createDataFrame(
            [("t", 0, 5, None, T0 + timedelta(seconds=5), "k5", True)], NOW_SCHEMA
        )
    )
    assert find_divergences(lambda _: audited, lambda _: unchanged, [window(0, 6, 6)], {}) == {}
    replaced = held_now(spark, {0: "a0", 5: None})  # another unidentified record at 5
    found = find_divergences(lambda _: audited, lambda _: replaced, [window(0, 6, 6)], {})
    assert found == {("t", 0): 5}
