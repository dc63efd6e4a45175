"""Duplicates, rates, causes and sequence gaps as the engine publishes them, on hand-made
fingerprints; every expected value is worked out by hand beside the data."""

from __future__ import annotations

from typing import Any

import pytest

from dgm.contracts.vocabulary import DuplicateCause, LossCause
from tests.support import engine_run
from tests.support.fingerprint_rows import fp


def tables(spark: Any, *rows: tuple[Any, ...], sources: tuple[str, ...] = ("s",)) -> Any:
    """The engine's tables of pipeline p (`sources` into k) over `rows`."""
    return engine_run.run(spark, list(rows), engine_run.config("k", sources=sources))


COPY = ("topic", "message_id", "partition", "offset", "copies", "copy_number", "is_extra_copy")


def test_copies_are_every_copy_of_ids_seen_twice_committed_in_one_topic(spark: Any) -> None:
    found_tables = tables(
        spark,
        # a: three committed copies; the one on partition 1 is earliest by timestamp.
        fp("t", 0, 0, "a", second=1),
        fp("t", 1, 0, "a", second=0),
        fp("t", 0, 5, "a", second=1),
        # e: a timestamp tie is broken by partition, then offset: p0/9 comes first.
        fp("t", 1, 3, "e", second=5),
        fp("t", 0, 9, "e", second=5),
        fp("t", 0, 1, "b"),  # once: no duplicate
        fp("t", 0, 2, "c"),  # c: its second copy was aborted, so it is no duplicate
        fp("t", 0, 3, "c", committed=False),
        fp("t", 0, 4, "d"),  # d: once per topic, in two topics: no duplicate
        fp("u", 0, 0, "d"),
        fp("t", 0, 6, None),  # unidentified records are never copies of each other
        fp("t", 0, 7, None),
    )
    found = sorted(tuple(r[c] for c in COPY) for r in found_tables.duplicates)
    assert found == [
        ("t", "a", 0, 0, 3, 2, True),
        ("t", "a", 0, 5, 3, 3, True),
        ("t", "a", 1, 0, 3, 1, False),
        ("t", "e", 0, 9, 2, 1, False),
        ("t", "e", 1, 3, 2, 2, True),
    ]


def test_summary_counts_records_ids_extra_copies_rate_unidentified_and_aborted(
    spark: Any,
) -> None:
    found_tables = tables(
        spark,
        # t: committed ids a a a b c c → 6 identified, 3 distinct, 3 extra copies.
        *(fp("t", 0, o, i) for o, i in enumerate(["a", "a", "a", "b", "c", "c"])),
        fp("t", 0, 6, None),  # unidentified
        fp("t", 0, 7, "d", committed=False),  # aborted: d is no distinct id of t
        fp("t", 0, 8, "b", committed=False),  # aborted: no extra copy of b
        # u: only aborted records, no id committed: the rate is undefined, not 0.
        fp("u", 0, 0, "x", committed=False),
        # v: one id once: rate 0.
        fp("v", 0, 0, "y"),
    )
    found = {r["topic"]: r for r in found_tables.summary()}
    counts = {
        "topic": "t",
        "records": 7,  # 6 identified + 1 unidentified, both committed
        "distinct_ids": 3,
        "duplicate_copies": 3,
        "duplicate_rate": pytest.approx(3 / 3),
        "unidentified": 1,
        "aborted": 2,
    }
    assert {k: found["t"][k] for k in counts} == counts  # other tables' columns beside them
    assert found["u"]["records"] == 0
    assert found["u"]["aborted"] == 1
    assert found["u"]["duplicate_rate"] is None
    assert (found["v"]["duplicate_copies"], found["v"]["duplicate_rate"]) == (0, 0.0)
    assert sorted(found) == ["t", "u", "v"]


def causes_case() -> list[tuple[Any, ...]]:
    """One sink duplicate per cause, plus one with no evidence and one with two causes."""
    source = [
        fp("s", 0, 1, "r1", producer="src", seq=1),
        fp("s", 0, 2, "r2", producer="src", seq=2),
        # r3 was already duplicated in the source (two committed copies).
        fp("s", 0, 3, "r3", producer="src", seq=3),
        fp("s", 0, 4, "r3", producer="src2", seq=0),
        fp("s", 0, 5, "r5"),
        # r4 and r6 exist in the source only in an aborted transaction.
        fp("s", 0, 6, "r4", committed=False),
        fp("s", 0, 7, "r6", committed=False),
        # r7: once committed, once aborted: not "only in aborted transactions".
        fp("s", 0, 8, "r7", committed=False),
        fp("s", 0, 9, "r7"),
    ]
    sink = [
        # r1: the same send (q, seq 4) written twice; a retried send repeats its dgm-src,
        # so reprocessing applies too, and producer retry wins.
        fp("k", 0, 0, "r1", producer="q", seq=4, lineage="s/0/1"),
        fp("k", 0, 1, "r1", producer="q", seq=4, lineage="s/0/1"),
        # r2: the same source record processed again by a restarted session (new producer).
        fp("k", 0, 2, "r2", producer="q", seq=5, lineage="s/0/2"),
        fp("k", 0, 3, "r2", producer="q2", seq=0, lineage="s/0/2"),
        # r3: each source copy processed once: upstream.
        fp("k", 0, 4, "r3", producer="q2", seq=1, lineage="s/0/3"),
        fp("k", 0, 5, "r3", producer="q2", seq=2, lineage="s/0/4"),
        # r4: an aborted source record read and then reprocessed: aborted read wins.
        fp("k", 0, 6, "r4", producer="q2", seq=3, lineage="s/0/6"),
        fp("k", 0, 7, "r4", producer="q3", seq=0, lineage="s/0/6"),
        # r5: no audit headers at all: nothing says why.
        fp("k", 0, 8, "r5"),
        fp("k", 0, 9, "r5"),
        # r6: an aborted read, but only once: not a duplicate, so not listed here.
        fp("k", 0, 10, "r6", producer="q3", seq=1, lineage="s/0/7"),
        # r7: two copies from one committed source record, different sessions: reprocessing.
        fp("k", 0, 11, "r7", producer="q3", seq=2, lineage="s/0/9"),
        fp("k", 0, 12, "r7", producer="q4", seq=0, lineage="s/0/9"),
        # r1 once more in another sink topic: a duplicate is per topic.
        fp("k2", 0, 0, "r1", producer="q", seq=9, lineage="s/0/1"),
    ]
    return source + sink


def test_each_cause_and_the_precedence_between_them(spark: Any) -> None:
    found = {
        (r["message_id"], r["copy_number"]): (r["topic"], r["pipeline"], r["copies"], r["cause"])
        for r in tables(spark, *causes_case()).duplicates
        if r["topic"] == "k"
    }
    # Every copy of an id carries its cause; r1 is a producer retry and reprocessing (a
    # retried send repeats its dgm-src), r4 an aborted read and reprocessing.
    causes = {
        "r1": DuplicateCause.PRODUCER_RETRY,
        "r2": DuplicateCause.REPROCESSING,
        "r3": DuplicateCause.UPSTREAM,
        "r4": DuplicateCause.ABORTED_READ,
        "r5": DuplicateCause.UNKNOWN,
        "r7": DuplicateCause.REPROCESSING,
    }
    assert found == {(i, n): ("k", "p", 2, cause) for i, cause in causes.items() for n in (1, 2)}


def test_a_topic_no_pipeline_writes_takes_its_causes_from_the_topics_its_dgm_src_names(
    spark: Any,
) -> None:
    found = {
        (r["topic"], r["message_id"]): (r["pipeline"], r["cause"])
        for r in tables(
            spark,
            fp("u", 0, 0, "a"),  # a: held twice upstream, so twice downstream
            fp("u", 0, 1, "a"),
            fp("u", 0, 2, "b", committed=False),  # b: aborted upstream
            fp("d", 0, 0, "a", lineage="u/0/0"),
            fp("d", 0, 1, "a", lineage="u/0/1"),
            fp("d", 0, 2, "b", lineage="u/0/2"),
            fp("d", 0, 3, "b", lineage="u/0/2"),
            fp("e", 0, 0, "c"),  # e names no upstream: only its own records speak
            fp("e", 0, 1, "c"),
        ).duplicates
        if r["copy_number"] == 2
    }
    assert found == {
        ("u", "a"): (None, DuplicateCause.UNKNOWN),  # u itself names no upstream
        ("d", "a"): (None, DuplicateCause.UPSTREAM),
        ("d", "b"): (None, DuplicateCause.ABORTED_READ),  # and reprocessing: the same dgm-src twice
        ("e", "c"): (None, DuplicateCause.UNKNOWN),
    }


def test_sequence_gaps_per_session_and_partition(spark: Any) -> None:
    found_tables = tables(
        spark,
        # p on partition 0: 0 1 _ _ 4 5 5 _ _ 8 → gaps 2..3 and 6..7 (the repeat is no gap).
        *(fp("s", 0, o, f"m{o}", producer="p", seq=s) for o, s in enumerate([0, 1, 4, 5, 5, 8])),
        # p on partition 1 starts at 2: 0..1 are missing (the session starts at 0).
        fp("s", 1, 0, "n0", producer="p", seq=2),
        fp("s", 1, 1, "n1", producer="p", seq=3),
        # q: seq 1 was aborted but reached the log: no gap.
        fp("s", 0, 10, "q0", producer="q", seq=0),
        fp("s", 0, 11, "q1", producer="q", seq=1, committed=False),
        fp("s", 0, 12, "q2", producer="q", seq=2),
        # Unstamped or half-stamped records say nothing about sequences.
        fp("s", 0, 13, "x", producer=None, seq=40),
        fp("s", 0, 14, "y", producer="r", seq=None),
        # The same session name on another source topic is another run: 0 then 3 → 1..2.
        fp("u", 0, 0, "z0", producer="p", seq=0),
        fp("u", 0, 1, "z1", producer="p", seq=3),
        # A topic no pipeline reads is not judged for gaps.
        fp("x", 0, 0, "w0", producer="p", seq=5),
        sources=("s", "u"),
    )
    found = sorted(
        (r["topic"], r["partition"], r["producer"], r["seq"], r["seq"] + r["missing"] - 1)
        for r in found_tables.lost
        if r["cause"] == LossCause.SEQUENCE_GAP
    )
    assert found == [
        ("s", 0, "p", 2, 3),
        ("s", 0, "p", 6, 7),
        ("s", 1, "p", 0, 1),
        ("u", 0, "p", 1, 2),
    ]
