"""Lost ids, claimed offsets and aborted reads as the engine counts them, on hand-made
fingerprints; every expected value is worked out by hand beside the data."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pyarrow as pa

from dgm.config.document import DgmConfig
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.samples import rows_table
from spark_jobs.analyze import claims
from spark_jobs.analyze.context import History, context
from tests.support import engine_run
from tests.support.engine_run import EXTERNAL
from tests.support.fingerprint_rows import T0, fp

CUTOFF = T0 + timedelta(seconds=100)


def tables(
    spark: Any, *rows: tuple[Any, ...], committed: dict[Any, int], config: Any = None
) -> engine_run.Tables:
    """The engine's tables over `rows` as of CUTOFF (grace 0), pipeline p by default."""
    return engine_run.run(spark, list(rows), config, committed, CUTOFF)


def lost(found: engine_run.Tables, *columns: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in columns) for r in found.lost)


def group_offsets(*rows: tuple[str, str, int, int, int]) -> pa.Table:
    """(group, topic, partition, committed_offset, second sampled) rows of group_offsets."""
    full = [
        {"sampled_at": T0 + timedelta(seconds=s), "cluster_id": "c", "group_id": g, "topic": t}
        | {"partition": p, "committed_offset": o, "group_state": "Stable"}
        for g, t, p, o, s in rows
    ]
    return rows_table("group_offsets", full)


def groups(*pairs: tuple[str, str]) -> DgmConfig:
    """A config of (pipeline, consumer group) pairs."""
    return DgmConfig(
        pipelines=tuple(
            PipelineConfig(
                name=name,
                source_topics=("s",),
                sink_topics=("k",),
                consumer_group=g,
                declared_semantic="at-least-once",
            )
            for name, g in pairs
        )
    )


def test_latest_committed_takes_the_newest_sample_per_partition_of_the_group() -> None:
    offsets = group_offsets(
        ("g", "s", 0, 5, 1),
        ("g", "s", 0, 9, 3),  # newest for s/0
        ("g", "s", 0, 7, 2),
        ("g", "s", 1, 2, 1),
        ("other", "s", 0, 100, 9),  # another group
    )
    found = claims.latest_committed(offsets, groups(("p", "g"), ("q", "g")))
    # Two pipelines of one group share its commits.
    assert found == {("p", "s", 0): 9, ("p", "s", 1): 2, ("q", "s", 0): 9, ("q", "s", 1): 2}


def test_latest_committed_ignores_commits_sampled_after_the_audit_read_the_sinks() -> None:
    # The audit read the sinks as of second 2; the commit sampled at second 3 may cover
    # sink copies it has not read (the CI fault suite showed 10 such records as lost).
    offsets = group_offsets(("g", "s", 0, 5, 1), ("g", "s", 0, 9, 3))
    config = groups(("p", "g"))
    as_of = T0 + timedelta(seconds=2)
    assert claims.latest_committed(offsets, config, as_of) == {("p", "s", 0): 5}
    at_the_sample = claims.latest_committed(offsets, config, T0 + timedelta(seconds=3))
    assert at_the_sample == {("p", "s", 0): 9}


def test_a_pipeline_whose_sink_partition_was_read_to_an_earlier_time_claims_as_of_then() -> None:
    # Sink k/2's leader was away: the audit read it only to its sample of second 2, so the
    # commit sampled at second 3 may cover copies in k/2 it has not read (the CI fault suite
    # once showed 5 such records lost). q's sinks were read to second 3.
    config = DgmConfig(
        pipelines=(
            *groups(("p", "g")).pipelines,
            PipelineConfig(name="q", source_topics=("s",), sink_topics=("m",),
                           consumer_group="g", declared_semantic="at-least-once"),
        )
    )  # fmt: skip
    at = {n: T0 + timedelta(seconds=n) for n in (2, 3)}
    last = {("k", 0): at[3], ("k", 2): at[2], ("m", 0): at[3], ("other", 0): None}
    read_to = claims.sinks_read_to(config, last)
    assert read_to == {"p": at[2], "q": at[3]}
    assert claims.unread(read_to) == set()
    offsets = group_offsets(("g", "s", 0, 5, 1), ("g", "s", 0, 9, 3))
    found = claims.latest_committed(offsets, config, at[3], read_to)
    assert found == {("p", "s", 0): 5, ("q", "s", 0): 9}
    # A sink partition not read this cycle (None): none of its pipeline's commits count.
    unread = claims.sinks_read_to(config, {**last, ("k", 1): None})
    assert unread["p"] is None and claims.unread(unread) == {"p"}
    assert claims.latest_committed(offsets, config, at[3], unread) == {("q", "s", 0): 9}
    lines = claims.held_lines(unread, {**last, ("k", 1): None}, config)
    assert len(lines) == 1 and "sink partitions k/1 missing" in lines[0]


def test_a_held_pipeline_keeps_the_claims_of_the_last_cycle() -> None:
    # p is held now at offset 5; the last cycle, its sinks read, claimed 9: that stays.
    before = {("p", "s", 0): 9, ("p", "s", 1): 4, ("q", "s", 0): 7}
    now = {("p", "s", 0): 5, ("q", "s", 0): 6}
    assert claims.held_claims(now, before, {"p"}) == {
        ("p", "s", 0): 9, ("p", "s", 1): 4, ("q", "s", 0): 6,
    }  # fmt: skip


def test_claimed_offsets_of_an_external_sink_are_the_greater_of_group_and_table() -> None:
    # The table holds s/0/7 (8 beats the group's 3) and s/1/4 (so 5); a row without lineage
    # says nothing.
    known = History(held_from={}, src_offsets={(EXTERNAL, "s", 0): 7, (EXTERNAL, "s", 1): 4},
                    src_topics={EXTERNAL: {"s"}})  # fmt: skip
    config = engine_run.config(external=True)
    found = context(config, known, {("p", "s", 0): 3}, CUTOFF).claimed
    assert found == {("p", "s", 0): 8, ("p", "s", 1): 5}
    # A group that committed further than the table holds keeps its claim.
    assert context(config, known, {("p", "s", 0): 13}, CUTOFF).claimed[("p", "s", 0)] == 13
    # A sink topic's dgm-src is no claim: only the group's commits are.
    topic_sink = History({}, {("k", "s", 0): 7}, {"k": {"s"}})
    assert context(engine_run.config(), topic_sink, {}, CUTOFF).claimed == {}


def test_claimed_offsets_come_from_an_external_sink_s_own_rows(spark: Any) -> None:
    rows = [fp("s", 0, n, i, second=1) for n, i in enumerate("abc")] + [
        fp(EXTERNAL, 0, 0, "a", lineage="s/0/0"),
        fp(EXTERNAL, 0, 1, "c", lineage="s/0/2"),
    ]
    found = tables(spark, *rows, committed={}, config=engine_run.config(external=True))
    # The table holds s/0/2, so offsets 0-2 are claimed: b is lost.
    assert lost(found, "message_id", "cause") == [("b", "not in sink")]
    assert found.total("records_checked") == 3


def test_lost_ids_are_checked_source_records_without_a_committed_sink_copy(spark: Any) -> None:
    found = tables(
        spark,
        fp("s", 0, 0, "a", second=1),  # in the sink
        fp("s", 0, 1, "b", second=2),  # lost
        fp("s", 0, 2, "c", second=3),  # only an aborted sink copy, the commit past it: torn
        fp("s", 0, 3, "d", second=4, committed=False),  # aborted in the source: not checked
        fp("s", 0, 4, None, second=5),  # no id: not checked
        fp("s", 0, 5, "e", second=200),  # within the grace period: not yet
        fp("s", 0, 6, "f", second=6),  # at the committed offset: not claimed yet
        fp("s", 1, 0, "g", second=7),  # partition without a commit: not claimed
        fp("s", 0, 7, "b", second=1),  # beyond the commit: b is lost once, at offset 1
        fp("k", 0, 0, "a"),
        fp("k", 0, 1, "c", committed=False),
        committed={("s", 0): 6},
    )
    assert found.total("records_checked") == 3
    assert lost(found, "message_id", "partition", "offset", "missing", "cause") == [
        ("b", 0, 1, 1, "not in sink"),
        ("c", 0, 2, 1, "torn commit"),  # lost all the same (docs/design.md, "torn commit")
    ]
    # Counted in the window of the source record.
    assert found.lost_per_window() == {T0: 2}


def test_a_lost_id_is_reported_at_its_first_source_record(spark: Any) -> None:
    found = tables(
        spark,
        fp("s", 1, 0, "x", second=5),
        fp("s", 0, 3, "x", second=5),  # same timestamp: partition 0 comes first
        fp("s", 0, 4, "x", second=6),
        fp("k", 0, 0, "other"),
        committed={("s", 0): 9, ("s", 1): 9},
    )
    assert lost(found, "partition", "offset") == [(0, 3)]


def test_sequence_gaps_count_once_the_record_after_them_is_past_the_grace_period(
    spark: Any,
) -> None:
    found = tables(
        spark,
        fp("s", 0, 0, "a", second=1, producer="p", seq=0),
        fp("s", 0, 1, "b", second=2, producer="p", seq=3),  # 1, 2 missing
        fp("s", 0, 2, "c", second=3, producer="p", seq=3),  # a retry of seq 3
        fp("s", 0, 3, "d", second=150, producer="p", seq=5),  # 4 missing, but too recent
        fp("s", 1, 0, "e", second=4, producer="q", seq=1, committed=False),  # 0 missing
        *(fp("k", 0, n, i) for n, i in enumerate("abcde")),
        committed={("s", 0): 9},
    )
    columns = ("partition", "producer", "seq", "missing", "cause", "message_id", "offset")
    assert lost(found, *columns) == [
        (0, "p", 1, 2, "sequence gap", None, None),
        (1, "q", 0, 1, "sequence gap", None, None),
    ]
    # Both counted in the window of the record after the gap (seconds 2 and 4).
    assert found.lost_per_window() == {T0: 3}


def test_aborted_reads_are_sink_records_of_ids_the_source_only_aborted(spark: Any) -> None:
    found = tables(
        spark,
        fp("s", 0, 0, "a", committed=False),  # only aborted
        fp("s", 0, 1, "b", committed=False),
        fp("s", 0, 2, "b"),  # aborted once, then committed: fine
        fp("s", 0, 3, "c"),
        fp("k", 0, 0, "a"),
        fp("k", 0, 1, "a"),  # two aborted reads
        fp("k", 0, 2, "a", committed=False),  # aborted in the sink as well: no read
        fp("k", 0, 3, "b"),
        fp("k", 0, 4, "c"),
        fp("k", 0, 5, "z"),  # unknown to the source: not an aborted read
        committed={},
    )
    assert found.total("aborted_reads") == 2


def test_pipelines_are_judged_apart_even_on_a_shared_source(spark: Any) -> None:
    config = engine_run.config(
        pipelines=(engine_run.pipeline("p", sinks=("k",)), engine_run.pipeline("r", sinks=("j",)))
    )
    found = tables(
        spark,
        fp("s", 0, 0, "a", producer="p", seq=1),
        fp("s", 0, 1, "b", producer="p", seq=2),
        fp("k", 0, 0, "a"),  # a reached p's sink only, b reached r's sink only
        fp("j", 0, 0, "b"),
        committed={("p", "s", 0): 9, ("r", "s", 0): 9},
        config=config,
    )
    assert lost(found, "pipeline", "cause", "message_id", "seq") == [
        ("p", "not in sink", "b", 2),
        ("p", "sequence gap", None, 0),
        ("r", "not in sink", "a", 1),
        ("r", "sequence gap", None, 0),
    ]


def test_a_missing_record_older_than_the_held_sink_history_is_beyond_retention(
    spark: Any,
) -> None:
    source = [fp("s", 0, n, i, second=n + 1) for n, i in enumerate("abcdefz")]
    sink = [
        # Sink partition 0 is held from offset 3 (second 4): copies of a, b, c may be gone.
        *(fp("k", 0, n, i, second=n + 1) for n, i in enumerate("def", start=3)),
        # Partition 1 is held from offset 0: it sets no horizon.
        fp("k", 1, 0, "g", second=9),
    ]
    found = tables(spark, *source, *sink, committed={("s", 0): 7})
    assert found.total("beyond_retention") == 3
    assert found.total("records_checked") == 7 - 3  # beyond retention is not judged
    assert lost(found, "message_id") == [("z",)]
    # A sink that is an external table is read whole: nothing is beyond its retention.
    external = [(EXTERNAL, *r[1:]) for r in sink]
    whole = tables(
        spark, *source, *external, committed={("s", 0): 7}, config=engine_run.config(external=True)
    )
    assert whole.total("beyond_retention") == 0
    assert lost(whole, "message_id") == [("a",), ("b",), ("c",), ("z",)]


def test_a_session_first_held_sequence_is_its_floor_on_a_partition_not_held_from_offset_0(
    spark: Any,
) -> None:
    found = tables(
        spark,
        fp("s", 0, 5, "a", second=1, producer="p", seq=7),  # offsets 0-4 gone: no gap 0-6
        fp("s", 0, 6, "b", second=2, producer="p", seq=9),  # 8 missing: a gap
        fp("s", 1, 0, "c", second=3, producer="q", seq=2),  # held from 0: 0-1 missing
        committed={},
    )
    assert lost(found, "partition", "producer", "seq", "missing") == [
        (0, "p", 8, 1),
        (1, "q", 0, 2),
    ]
