"""replay_runs against its definition read literally (spark_jobs/analyze/explain.py): walk the
extra copies of each sink partition in offset order and cut a run wherever a copy does not
continue the one before it. The function finds runs by position over one sort; this holds the
two equal on generated copies (interleaved source partitions, gaps, copies without a source)."""

from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.analyze.explain import replay_runs

# (sink partition, sink offset, source partition, source offset or None) of an extra copy.
COPY = st.tuples(
    st.integers(0, 1), st.integers(0, 30), st.integers(0, 1), st.none() | st.integers(0, 30)
)


def blocks(rows: pd.DataFrame) -> list[list[object]]:
    """One sink partition's extra copies (in offset order) cut into blocks: a copy starts a
    new block unless it continues the last copy of its source partition."""
    found: list[list[object]] = []
    before: dict[tuple[object, object], pd.Series] = {}  # the last copy per source
    for index, row in rows.iterrows():
        source = (row["source_topic"], row["source_partition"])
        previous = before.get(source)
        continues = (
            previous is not None
            and row["offset"] == previous["offset"] + 1
            and row["source_offset"] > previous["source_offset"]
        )
        if continues:
            found[-1].append(index)
        else:
            found.append([index])
        before[source] = row
    return found


def literal(extra: pd.DataFrame, min_run: int) -> dict[object, str]:
    """Each copy's run text by walking the rows, as the definition reads."""
    named: dict[object, str] = {}
    keyed = extra[extra["source_offset"].notna()]
    for (_, topic, partition), rows in keyed.groupby(["pipeline", "topic", "partition"]):
        for block in blocks(rows.sort_values("offset")):
            if len(block) < min_run:
                continue
            first, last = extra.loc[block[0]], extra.loc[block[-1]]
            named.update(
                dict.fromkeys(
                    block,
                    f"replay run: source {first['source_topic']}/"
                    f"{int(first['source_partition'])} offsets {int(first['source_offset'])}-"
                    f"{int(last['source_offset'])} rewritten at {topic}/{int(partition)} "
                    f"offsets {int(first['offset'])}-{int(last['offset'])} ({len(block)} records)",
                )
            )
    return named


@settings(max_examples=200, deadline=None)
@given(
    copies=st.lists(COPY, max_size=40, unique_by=lambda c: (c[0], c[1])),
    min_run=st.integers(1, 4),
)
def test_runs_by_position_equal_the_literal_walk(
    copies: list[tuple[int, int, int, int | None]], min_run: int
) -> None:
    extra = pd.DataFrame(
        {
            "pipeline": "p",
            "topic": "sink",
            "partition": [c[0] for c in copies],
            "offset": [c[1] for c in copies],
            "source_topic": "source",
            "source_partition": [c[2] for c in copies],
            "source_offset": pd.array([c[3] for c in copies], dtype="Int64"),
        },
        index=pd.RangeIndex(100, 100 + len(copies)),
    )
    found = replay_runs(extra, min_run)
    expected = literal(extra, min_run)
    assert {i: t for i, t in found.items() if t} == expected
    assert set(found.index) == set(extra.index)
