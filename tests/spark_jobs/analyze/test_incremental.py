"""The incremental engine, fed random splits of generated fingerprints cycle by cycle, publishes
exactly the tables a rebuild over the same fingerprints publishes (every cycle after the first,
which is a rebuild itself; each rebuilt beside the cycle, in a thread) and what the
DuckDB reference computes (the last cycle): through a late copy with an earlier timestamp, a
group offset that moves back (reset), retention expiring the oldest fingerprints, a
pipeline added to the config, and an external sink whose snapshot (read whole each cycle)
grows and later loses rows, with the sinks' records out of order judged cycle by cycle;
pipeline p filters (its `expected` predicate excluded a tenth of its source records, and
could not evaluate a few more); and a deadline-claim pipeline
(claim = "deadline") whose records age past max_delay cycle by cycle, with copies of records
it lost arriving late (LATE_AT)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from spark_jobs.analysis_input import Fingerprints, conformed
from spark_jobs.analyze.engine import Engine
from tests.support import engine_run, reference
from tests.support.deadline_comparison import assert_agree, late_copies
from tests.support.duplicate_comparison import SUMMARY, canonical
from tests.support.generated_fingerprints import pipeline as generated_pipeline
from tests.support.incremental_cycles import CYCLES, batches_of, canonical_all, claims
from tests.support.lost_comparison import assert_same as assert_same_lost
from tests.support.order_comparison import canonical as canonical_order

RESET_AT = 4  # the group's committed offsets go back to half
ADDED_AT = 5  # pipeline q (s2 -> k2) joins the config
EXPIRED_AT = 7  # fingerprints older than the first tenth of the time are dropped
DELETED_AT = 6  # rows deleted from the external sink's table
EXTERNAL = "external:r:tbl"
LATE_AT = 6  # late copies of records the deadline pipeline d lost arrive
MAX_DELAY = timedelta(seconds=10)


@pytest.fixture
def two_shuffle_partitions(spark: Any) -> Iterator[None]:
    with engine_run.shuffle_partitions(spark, 2):
        yield


@pytest.fixture
def beside() -> Iterator[ThreadPoolExecutor]:
    """A thread for the rebuilds that run beside the incremental cycles."""
    with ThreadPoolExecutor(1) as pool:
        yield pool


def late_copy(sink: pa.Table) -> pa.Table:
    """A copy of a committed sink record from a third of the way in (not expired at the end),
    written after everything else with a timestamp a second before the original's: it
    becomes the id's first copy."""
    held = sink.filter(pc.and_(sink["committed"], pc.is_valid(sink["message_id"])))
    early = held.slice(held.num_rows // 3, 1)
    partition = early["partition"][0].as_py()
    in_partition = sink.filter(pc.equal(sink["partition"], partition))
    offset = pa.array([pc.max(in_partition["offset"]).as_py() + 1], pa.int64())
    stamp = pc.subtract(early["timestamp"], pa.scalar(timedelta(seconds=1)))
    early = early.set_column(early.schema.get_field_index("offset"), "offset", offset)
    early = early.set_column(early.schema.get_field_index("timestamp"), "timestamp", stamp)
    return early.cast(sink.schema)


def filtering(source: pa.Table, rng: np.random.Generator) -> pa.Table:
    """`source` with a tenth of its records filtered by pipeline p's predicate and 3%
    undecided (as the audit marks them)."""
    draw = rng.random(source.num_rows)
    kind = pa.list_(pa.string())
    filtered = pa.array([["p"] if d < 0.1 else None for d in draw], kind)
    undecided = pa.array([["p"] if 0.1 <= d < 0.13 else None for d in draw], kind)
    source = source.set_column(
        source.schema.get_field_index("filtered_by"), "filtered_by", filtered
    )
    at = source.schema.get_field_index("filter_undecided_by")
    return source.set_column(at, "filter_undecided_by", undecided)


def test_random_splits_publish_what_a_rebuild_and_the_reference_do(
    spark: Any, two_shuffle_partitions: None, beside: ThreadPoolExecutor
) -> None:
    rng = np.random.default_rng(7)
    a = generated_pipeline("a", sends=3_000, partitions=3, seed=3, topics=("s", "k"))
    a = replace(a, source=filtering(a.source, rng))
    b = generated_pipeline("b", sends=2_000, partitions=2, seed=4, topics=("s2", "k2"))
    whole = pa.concat_tables([a.source, a.sink, b.source, b.sink])
    cycle_of = batches_of(whole, rng)
    late = late_copy(a.sink)
    whole = pa.concat_tables([whole, late])
    cycle_of = np.r_[cycle_of, CYCLES - 1]  # the late copy comes last
    c = generated_pipeline("c", sends=1_500, partitions=2, seed=8, topics=("s3", "x"))
    whole = pa.concat_tables([whole, c.source])
    cycle_of = np.r_[cycle_of, batches_of(c.source, rng)]
    d = generated_pipeline("d", sends=1_500, partitions=2, seed=9, topics=("s4", "k4"))
    d_sink, d_late = late_copies(d, 8, 12, 5, MAX_DELAY)
    whole = pa.concat_tables([whole, d.source, d_sink])
    cycle_of = np.r_[cycle_of, batches_of(pa.concat_tables([d.source, d_sink]), rng)]
    whole = pa.concat_tables([whole, d_late])
    cycle_of = np.r_[cycle_of, np.full(d_late.num_rows, LATE_AT)]
    table = c.sink.set_column(0, "topic", pa.array([EXTERNAL] * c.sink.num_rows, pa.string()))
    table = table.cast(c.sink.schema)
    external_cycle = batches_of(table, rng)
    deleted = rng.random(table.num_rows) < 0.01
    stamps = pc.cast(whole["timestamp"], pa.int64()).to_numpy()
    expire_before = np.quantile(stamps, 0.1)
    p = engine_run.pipeline("p", ("s",), ("k",))
    q = engine_run.pipeline("q", ("s2",), ("k2",))
    r = engine_run.pipeline("r", ("s3",), (), external=True)
    by_deadline = replace(
        engine_run.pipeline("d", ("s4",), ("k4",)),
        consumer_group="",
        claim="deadline",
        max_delay="10s",
    )
    lost_before_late: set[str] = set()
    engine, before, external_before, snapshot_before = Engine(), None, None, None
    did: list[str] = []
    for cycle in range(CYCLES):
        keep = cycle_of <= cycle
        if cycle >= EXPIRED_AT:
            keep &= stamps >= expire_before
        rows = whole.filter(pa.array(keep))
        added = whole.filter(pa.array(keep & (cycle_of == cycle)))
        configured = {"p": "s", "r": "s3"} | ({"q": "s2"} if cycle >= ADDED_AT else {})
        chosen = (p, r, by_deadline, q) if cycle >= ADDED_AT else (p, r, by_deadline)
        config = engine_run.config(pipelines=chosen)
        # Claims lag a cycle behind what was written; at the reset they go back to half.
        seen = whole.filter(pa.array(keep & (cycle_of < cycle)))
        committed = claims(seen, configured, halve=cycle == RESET_AT)
        now = datetime.fromtimestamp(stamps[keep].max() / 1e6, UTC) - timedelta(seconds=5)
        held = (external_cycle <= cycle) & ~(deleted & (cycle >= DELETED_AT))
        snapshot = table.filter(pa.array(held))
        kept, external = spark.createDataFrame(rows), spark.createDataFrame(snapshot)
        fingerprints = Fingerprints(kept, external)
        if before is not None and cycle != EXPIRED_AT:  # expiry: everything read again
            fingerprints = replace(
                fingerprints,
                before=before,
                added=spark.createDataFrame(added),
                external_before=external_before,
            )
            if cycle % 3 != 2:  # small_cycle.py's driver path, else the Spark passes
                fingerprints = replace(
                    fingerprints,
                    added_rows=conformed(added),
                    external_rows=conformed(snapshot),
                    external_before_rows=conformed(snapshot_before),
                )
        # A rebuild over the same fingerprints, in a thread beside the cycle: both are mostly
        # small Spark jobs' fixed costs, which leave cores idle. The first cycle is a rebuild
        # itself (no state yet), of the very same input: nothing to compare it with.
        rebuilt = None
        if cycle > 0:
            rebuilt = beside.submit(
                Engine().cycle, config, Fingerprints(kept, external), committed, now
            )
        ours = engine.cycle(config, fingerprints, committed, now)
        did.append(engine.last)
        if rebuilt is not None:
            assert canonical_all(*ours) == canonical_all(*rebuilt.result()), (cycle, did[-1])
        if cycle == LATE_AT - 1:
            lost_before_late = {
                r["message_id"] for r in ours[0]["lost"].to_pylist() if r["pipeline"] == "d"
            }
        before, external_before, snapshot_before = kept, external, snapshot
    assert did[RESET_AT].startswith("rebuilt (claimed offsets moved back")
    assert did[ADDED_AT].startswith("rebuilt (pipelines or windows changed")
    assert did[EXPIRED_AT].startswith("rebuilt (fingerprints read again")
    incremental = [c for c, what in enumerate(did) if "touched" in what]
    assert incremental == [1, 2, 3, 6, 8], did
    assert [c for c in incremental if "on the driver" in did[c]] == [1, 3, 6], did

    # The last cycle against the DuckDB reference.
    tables, _ = ours
    everything = pa.concat_tables([rows, snapshot])
    duplicates = tables["duplicates"].to_pylist()
    copies = reference.duplicate_copies(everything)
    columns = [c for c in copies.column_names if not c.startswith("src_")]
    assert canonical(duplicates, columns) == canonical(copies.to_pylist(), columns)
    summary = [r for r in tables["topic_windows"].to_pylist() if r["window_start"] is None]
    theirs = reference.duplicate_summary(everything).to_pylist()
    assert canonical(summary, SUMMARY) == canonical(theirs, SUMMARY)
    cutoff = now - timedelta(seconds=config.analysis.grace_s)
    for name, source, sink in (("p", "s", "k"), ("q", "s2", "k2"), ("r", "s3", EXTERNAL)):
        commits = pa.Table.from_pylist(
            [
                {"topic": t, "partition": n, "committed_offset": o}
                for (pn, t, n), o in committed.items()
                if pn == name
            ]
        )
        expected = reference.lost(
            engine_run.of_topics(everything, source),
            engine_run.of_topics(everything, sink),
            commits,
            cutoff,
            external=name == "r",
            pipeline=name,
        )
        found = [r for r in tables["lost"].to_pylist() if r["pipeline"] == name]
        assert len(assert_same_lost(found, expected)) > 10
    # Records out of order: the kept marks judged each cycle's new records as the reference
    # judges all of them at once.
    behind = 0
    for source, sink in (("s", "k"), ("s2", "k2")):
        theirs = reference.out_of_order(
            engine_run.of_topics(everything, source), engine_run.of_topics(everything, sink)
        )
        mine = [r for r in tables["out_of_order"].to_pylist() if r["topic"] in (source, sink)]
        assert canonical_order(mine) == canonical_order(theirs.to_pylist())
        behind += len(mine)
    assert behind > 10
    counted = [r for r in ours[1].to_pylist() if r["pipeline"] == "p" and not r["total"]]
    filtered = reference.filtered(engine_run.of_topics(everything, "s"), "p")
    assert filtered[0] > 100 and filtered[1] > 30
    assert (
        sum(r["filtered"] for r in counted),
        sum(r["filter_undecided"] for r in counted),
    ) == filtered
    # The deadline pipeline: lost before its late copies came, late records after.
    late_ids = set(d_late["message_id"].to_pylist())
    assert late_ids <= lost_before_late
    d_tables = engine_run.Tables(
        [], [r for r in tables["lost"].to_pylist() if r["pipeline"] == "d"], [], [],
        [r for r in ours[1].to_pylist() if r["pipeline"] == "d"],
    )  # fmt: skip
    d_lost, d_late_count = assert_agree(
        d_tables,
        engine_run.of_topics(everything, "s4"),
        engine_run.of_topics(everything, "k4"),
        now,
        MAX_DELAY,
    )
    assert d_late_count == len(late_ids) == 5 and d_lost > 0
    assert not late_ids & {r["message_id"] for r in d_tables.lost}
    # The late copy is its id's first copy now, and the original an extra one.
    copy = late.to_pylist()[0]
    numbered = {
        r["offset"]: r["copy_number"] for r in duplicates if r["message_id"] == copy["message_id"]
    }
    assert numbered[copy["offset"]] == 1 and len(numbered) >= 2
