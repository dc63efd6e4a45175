"""The order rule (spark_jobs.analyze.order) on its own: which records are behind, and the
marks that let a cycle judge its new records without the old ones."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dgm.contracts.vocabulary import OrderAnomaly
from spark_jobs.analyze.order import (
    BEHIND,
    MARK,
    ROWS,
    above,
    judge,
    no_marks,
    order_rows,
    per_pipeline,
    records_of,
    split,
)
from spark_jobs.analyze.output import NO_TIME

PRODUCER = OrderAnomaly.OUT_OF_ORDER.value
SINK = OrderAnomaly.SINK_OUT_OF_ORDER.value


def records(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """(anomaly, partition, stream, offset, position) rows of topic 't' as records_of gives."""
    return pd.DataFrame(
        {
            "anomaly": [r[0] for r in rows],
            "topic": ["t"] * len(rows),
            "partition": pd.Series([r[1] for r in rows], dtype="int64"),
            "offset": pd.Series([r[3] for r in rows], dtype="int64"),
            "message_id": [f"m{r[3]}" for r in rows],
            "stream": [r[2] for r in rows],
            "position": pd.Series([r[4] for r in rows], dtype="int64"),
            "timestamp_us": pd.Series([1_000 * r[3] for r in rows], dtype="int64"),
        }
    )


def _strings(values: pd.Series, n: int) -> pa.Array:
    if values is None:
        return pa.nulls(n, pa.string())
    return pa.array(values.astype(object).where(values.notna(), None).tolist(), pa.string())


def rows_table(behind: pd.DataFrame, marks: pd.DataFrame) -> pa.Table:
    """ROWS of `behind` and `marks` (judge's), as order_rows gives them: the cycle's judge
    and the rebuild's pass compared in one form."""
    parts = []
    for kind, rows in ((BEHIND, behind), (MARK, marks)):
        n = len(rows)

        def ints(name: str, rows: pd.DataFrame = rows, n: int = n) -> pa.Array:
            if name not in rows:
                return pa.nulls(n, pa.int64())
            values = rows[name].to_numpy(dtype="int64")
            absent = values == NO_TIME if name == "timestamp_us" else np.zeros(n, bool)
            return pa.array(values, mask=absent)

        parts.append(
            pa.Table.from_arrays(
                [
                    pa.array([kind] * n, pa.string()),
                    _strings(rows["anomaly"], n),
                    _strings(rows["topic"], n),
                    pa.array(rows["partition"].to_numpy(dtype="int64")).cast(pa.int32()),
                    _strings(rows["stream"], n),
                    ints("offset"),
                    ints("timestamp_us"),
                    _strings(rows["message_id"], n) if "message_id" in rows else pa.nulls(n),
                    ints("position"),
                    ints("preceded_by"),
                    ints("preceded_at"),
                ],
                schema=ROWS,
            )
        )
    return pa.concat_tables(parts)


def behind_of(rows: pd.DataFrame) -> set[tuple[Any, ...]]:
    return {
        (r.anomaly, r.partition, r.stream, r.offset, r.position, r.preceded_by, r.preceded_at)
        for r in rows.itertuples()
    }


def test_a_retried_request_written_after_later_ones_is_behind() -> None:
    # seq 0 1 2 3, then 2 3 again (a retried request after the one behind it), then 4.
    seqs = [0, 1, 2, 3, 2, 3, 4]
    behind, marks = judge(
        records([(PRODUCER, 0, "p", o, s) for o, s in enumerate(seqs)]), no_marks()
    )
    # Each behind record names the highest seq before it and where that record is; the
    # second 3 is not behind (nothing higher precedes it).
    assert behind_of(behind) == {(PRODUCER, 0, "p", 4, 2, 3, 3)}
    assert marks.to_dict("records") == [
        {"anomaly": PRODUCER, "topic": "t", "partition": 0, "stream": "p", "offset": 6,
         "position": 4, "preceded_at": 6}
    ]  # fmt: skip


def test_streams_are_apart_per_partition_session_and_anomaly() -> None:
    rows = [
        (PRODUCER, 0, "p", 0, 5), (PRODUCER, 0, "q", 1, 1),  # another session
        (PRODUCER, 1, "p", 0, 1),  # another partition
        (SINK, 0, "s/0", 2, 3), (SINK, 0, "s/1", 3, 0),  # another source partition
        (SINK, 0, "s/0", 4, 1),
    ]  # fmt: skip
    behind, _ = judge(records(rows), no_marks())
    assert behind_of(behind) == {(SINK, 0, "s/0", 4, 1, 3, 2)}


@settings(max_examples=25, deadline=None)
@given(
    positions=st.lists(
        st.tuples(st.integers(0, 1), st.sampled_from(["p", "q"]), st.integers(0, 6)), max_size=30
    ),
    cut=st.integers(0, 30),
)
def test_judging_in_two_cycles_with_the_marks_is_judging_at_once(
    positions: list[tuple[int, str, int]], cut: int
) -> None:
    rows = [(PRODUCER, p, s, n, position) for n, (p, s, position) in enumerate(positions)]
    whole, whole_marks = judge(records(rows), no_marks())
    first, marks = judge(records(rows[:cut]), no_marks())
    assert above(records(rows[cut:]), marks)
    second, later_marks = judge(records(rows[cut:]), marks)
    assert behind_of(first) | behind_of(second) == behind_of(whole)
    assert len(first) + len(second) == len(whole)
    key = ["partition", "stream"]
    assert later_marks.sort_values(key).to_dict("records") == whole_marks.sort_values(key).to_dict(
        "records"
    )
    # The independent reading: a record whose position is below any earlier one's.
    truth = {
        n
        for n, (p, s, position) in enumerate(positions)
        if any(q == p and t == s and x > position for q, t, x in positions[:n])
    }
    assert set(whole["offset"]) == truth


def test_records_not_above_their_mark_are_said_to_be() -> None:
    _, marks = judge(records([(PRODUCER, 0, "p", 5, 1)]), no_marks())
    assert not above(records([(PRODUCER, 0, "p", 5, 0)]), marks)
    assert above(records([(PRODUCER, 0, "p", 6, 0), (PRODUCER, 1, "p", 0, 0)]), marks)


def test_rows_round_trip_through_arrow() -> None:
    batch = pa.table(
        {
            "anomaly": [PRODUCER] * 3,
            "topic": ["t"] * 3,
            "partition": pa.array([0, 0, 0], pa.int32()),
            "offset": pa.array([0, 1, 2], pa.int64()),
            "timestamp": pa.array([None, 1, 2], pa.timestamp("us", tz="UTC")),
            "message_id": ["a", None, "c"],
            "stream": ["p"] * 3,
            "position": pa.array([2, 0, 1], pa.int64()),
        }
    )
    behind, marks = split(order_rows(batch))
    assert list(behind["offset"]) == [1, 2] and list(behind["preceded_at"]) == [0, 0]
    assert list(behind["message_id"].fillna("")) == ["", "c"]
    assert list(behind["timestamp_us"]) == [1, 2]
    again, again_marks = judge(records_of(batch), no_marks())
    assert split(rows_table(again, again_marks))[1].equals(marks)


def test_each_anomaly_counts_against_its_own_pipelines() -> None:
    behind = pd.DataFrame(
        {
            "anomaly": [PRODUCER, SINK, SINK],
            "topic": ["src", "out", "out"],
            "stream": ["p", "src/0", "elsewhere/0"],
        }
    )
    found = per_pipeline(
        behind,
        sources={"src": ("a", "b")},
        sinks={"out": ("a", "c")},
        source_topics={"a": ("src",), "b": ("src",), "c": ("other",)},
    )
    assert sorted(zip(found["pipeline"], found["anomaly"], strict=True)) == [
        ("a", PRODUCER), ("a", SINK), ("b", PRODUCER),
    ]  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from([PRODUCER, SINK]),
            st.integers(0, 1),
            st.sampled_from(["p", "q/0"]),
            st.integers(0, 6),
            st.booleans(),
        ),
        max_size=40,
    )
)
def test_the_arrow_pass_finds_what_the_records_pass_finds(
    rows: list[tuple[str, int, str, int, bool]],
) -> None:
    # order_rows (the rebuild's, on integer codes) against judge on records_of (the cycle's).
    batch = pa.table(
        {
            "anomaly": pa.array([r[0] for r in rows], pa.string()),
            "topic": pa.array(["t"] * len(rows), pa.string()),
            "partition": pa.array([r[1] for r in rows], pa.int32()),
            "offset": pa.array(range(len(rows)), pa.int64()),
            "timestamp": pa.array(
                [n if r[4] else None for n, r in enumerate(rows)], pa.timestamp("us", tz="UTC")
            ),
            "message_id": pa.array(
                [f"m{n}" if r[4] else None for n, r in enumerate(rows)], pa.string()
            ),
            "stream": pa.array([r[2] for r in rows], pa.string()),
            "position": pa.array([r[3] for r in rows], pa.int64()),
        }
    )
    behind, marks = split(order_rows(batch))
    again, again_marks = split(rows_table(*judge(records_of(batch), no_marks())))
    key = ["anomaly", "partition", "stream", "offset"]

    def ordered(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.sort_values(key).reset_index(drop=True)

    assert ordered(behind).equals(ordered(again))
    assert ordered(marks).equals(ordered(again_marks))
