"""Sink order without dgm-src (spark_jobs.analyze.lineage, docs/design.md "Order, beside the
delivery semantic"): which sink records the id join places, the same records out of order
as with dgm-src stamped, and the incremental engine's cycles judging as a rebuild does when a
source record comes after its sink copy or an id stops being unique."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dgm.contracts.vocabulary import OrderAnomaly
from spark_jobs.analysis_input import Fingerprints
from spark_jobs.analyze.engine import Engine
from spark_jobs.analyze.lineage import with_id_lineage
from spark_jobs.analyze.order import per_pipeline
from spark_jobs.schemas import FINGERPRINT
from tests.support import engine_run, reference
from tests.support.engine_run import FAR
from tests.support.fingerprint_rows import fp
from tests.support.generated_fingerprints import pipeline as generated_pipeline
from tests.support.id_lineage import (
    GHOSTS,
    ROUTES,
    held_once,
    placeable,
    restarted,
    stripped,
    with_ghosts,
)
from tests.support.incremental_cycles import canonical_all
from tests.support.order_comparison import canonical

SINK = OrderAnomaly.SINK_OUT_OF_ORDER.value


def test_the_id_join_places_copies_of_ids_held_once(spark: Any) -> None:
    ctx = ROUTES  # k from s and s2, k3 from s3; ks sampled
    rows = [
        fp("s", 0, 0, "a"), fp("s", 0, 1, "b"), fp("s2", 1, 0, "b"), fp("s3", 0, 0, "b"),
        fp("s", 1, 0, "c"), fp("s", 1, 1, "c"), fp("s", 0, 2, "d", committed=False),
        fp("s2", 0, 5, "g"),
        fp("k", 0, 0, "a"),  # held once: placed
        fp("k", 0, 1, "b"),  # held by s and s2, both feed k: none
        fp("k", 0, 2, "c"),  # held twice in s: none
        fp("k", 0, 3, "d"),  # held only by an aborted record: none
        fp("k", 0, 4, "e"),  # held by no source record: none
        fp("k", 0, 5, "a", lineage="x/1/7"),  # dgm-src wins
        fp("k", 0, 6, "a", committed=False),  # aborted: never judged
        fp("k", 0, 7, None),  # unidentified
        fp("k", 0, 8, "g"),  # held once among k's source topics (in s2)
        fp("k3", 0, 0, "b"),  # k3 reads s3 only: held once there
        fp("ks", 0, 0, "a"),  # sampled: left out
        fp("external:p:tbl", 0, 0, "a"),  # an external sink: no log order
    ]  # fmt: skip
    width = len(FINGERPRINT.fields)
    frame = spark.createDataFrame([(*r, *(None,) * (width - len(r))) for r in rows], FINGERPRINT)
    found = with_id_lineage(frame, ctx).toArrow().to_pylist()
    placed = {(r["topic"], r["offset"]): (r["src_topic"], r["src_partition"], r["src_offset"])
              for r in found if r["src_topic"] is not None}  # fmt: skip
    assert placed == {
        ("k", 0): ("s", 0, 0), ("k", 5): ("x", 1, 7), ("k", 8): ("s2", 0, 5),
        ("k3", 0): ("s3", 0, 0),
    }  # fmt: skip
    assert sorted((r["topic"], r["partition"], r["offset"]) for r in found) == sorted(
        (r[0], r[1], r[2]) for r in rows
    )


def test_a_joined_stream_on_a_named_cluster_counts_against_its_pipeline() -> None:
    # The id join names the source topic qualified, dgm-src plainly: both count.
    behind = pd.DataFrame(
        {"anomaly": [SINK, SINK], "topic": ["k", "k"], "stream": ["a/orders/0", "orders/1"]}
    )
    found = per_pipeline(behind, {}, {"k": ("p",)}, {"p": ("a/orders",)})
    assert list(found["stream"]) == ["a/orders/0", "orders/1"]


def _data(seed: int, sends: int) -> tuple[pa.Table, pa.Table]:
    """(source, sink) of pipeline p (s -> k): upstream duplicates (retried sends), aborted
    source records read, copies of three source partitions interleaved in each sink
    partition, reprocessed copies, a restart going back in source position, and ghosts."""
    made = generated_pipeline("a", sends=sends, partitions=3, seed=seed, topics=("s", "k"))
    return made.source, with_ghosts(restarted(made.sink))


def test_the_id_join_judges_as_dgm_src_does(spark: Any, one_shuffle_partition: None) -> None:
    source, sink = _data(seed=11, sends=2_000)
    told = placeable(sink, source)
    joined = engine_run.run(spark, pa.concat_tables([source, stripped(sink)]))
    stamped = engine_run.run(spark, pa.concat_tables([source, told]))
    mine = canonical(r for r in joined.out_of_order if r["anomaly"] == SINK)
    assert mine == canonical(r for r in stamped.out_of_order if r["anomaly"] == SINK)
    assert mine == canonical(
        r for r in reference.out_of_order(source, told).to_pylist() if r["anomaly"] == SINK
    )
    assert joined.total("sink_out_of_order") == stamped.total("sink_out_of_order") == len(mine)
    # The restart alone puts most of its 30 copies out of order.
    assert len(mine) > 40
    # Copies of upstream duplicates and ghosts behind, as dgm-src tells, are not judged
    # without it.
    everything = reference.out_of_order(source, sink).to_pylist()
    unplaced = {r["message_id"] for r in everything if r["anomaly"] == SINK} - held_once(source)
    committed = Counter(source.filter(source["committed"])["message_id"].drop_null().to_pylist())
    assert {f"ghost-{n}" for n in range(GHOSTS)} <= unplaced
    assert {i for i in unplaced if committed[i] == 2}
    assert not unplaced & {r["message_id"] for r in joined.out_of_order}


CYCLES = 8
LATE_AT = 5  # source partition 2 is audited from this cycle on, after sink copies of it
DUPLICATE_AT = 6  # a second source record of a judged copy's id: its position goes


def _cycles(source: pa.Table, sink: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """The cycle each source and sink record is read in: each partition's offsets in
    increasing ranges, a sink copy no earlier than its source record (its dgm-src), but
    source partition 2 read from LATE_AT on."""
    offsets = source["offset"].to_numpy()
    partitions = source["partition"].to_numpy()
    size = np.bincount(partitions)
    base = offsets * CYCLES // size[partitions]
    of = {(p, o): c for p, o, c in zip(partitions, offsets, base, strict=True)}
    made_at = [
        of.get((p, o), 0) if p is not None else 0
        for p, o in zip(sink["src_partition"].to_pylist(), sink["src_offset"].to_pylist(),
                        strict=True)
    ]  # fmt: skip
    sink_at = np.zeros(sink.num_rows, np.int64)
    for partition in set(sink["partition"].to_pylist()):
        rows = np.flatnonzero(sink["partition"].to_numpy() == partition)
        rows = rows[np.argsort(sink["offset"].to_numpy()[rows])]
        sink_at[rows] = np.maximum.accumulate(np.array(made_at)[rows])
    source_at = np.where(partitions == 2, np.maximum(base, LATE_AT), base)
    return source_at, sink_at


def _second_copy(source: pa.Table, sink: pa.Table, sink_at: np.ndarray) -> tuple[str, pa.Table]:
    """(id, record): a source record holding again the id of the restart's first copy of
    source partition 0 (out of order, read before DUPLICATE_AT), at the end of its partition."""
    early = pc.less(pa.array(sink_at), DUPLICATE_AT)
    mine = sink.filter(pc.and_(early, pc.equal(sink["partition"], 0))).sort_by("offset")
    held, seen, chosen = held_once(source), set(), None
    for r in mine.to_pylist():
        if r["message_id"] in held and r["src_partition"] == 0 and r["committed"]:
            if r["message_id"] in seen:
                chosen = r["message_id"]  # its second copy: the first of the restart's
                break
            seen.add(r["message_id"])
    assert chosen is not None
    original = source.filter(pc.equal(source["message_id"], chosen)).to_pylist()[0]
    partition = source.filter(pc.equal(source["partition"], original["partition"]))
    again = original | {"offset": pc.max(partition["offset"]).as_py() + 1, "producer": None,
                        "seq": None}  # fmt: skip
    return chosen, pa.Table.from_pylist([again], schema=source.schema)


def _relinking(whole: pa.Table, cycle_of: np.ndarray) -> set[int]:
    """The cycles reading a committed source record of an id whose committed sink copy an
    earlier cycle read (every sink copy here lacks dgm-src)."""
    first_copy: dict[str, int] = {}
    rows = whole.select(["topic", "message_id", "committed"]).to_pylist()
    for r, cycle in zip(rows, cycle_of, strict=True):
        if r["topic"] == "k" and r["committed"] and r["message_id"] is not None:
            first_copy[r["message_id"]] = min(cycle, first_copy.get(r["message_id"], cycle))
    return {
        int(cycle)
        for r, cycle in zip(rows, cycle_of, strict=True)
        if r["topic"] == "s" and r["committed"] and first_copy.get(r["message_id"], cycle) < cycle
    }


def test_cycles_judge_as_a_rebuild(
    spark: Any, one_shuffle_partition: None, caplog: pytest.LogCaptureFixture
) -> None:
    source, sink = _data(seed=5, sends=1_500)
    source_at, sink_at = _cycles(source, sink)
    chosen, again = _second_copy(source, sink, sink_at)
    whole = pa.concat_tables([source, stripped(sink), again])
    cycle_of = np.r_[source_at, sink_at, DUPLICATE_AT]
    relinking = _relinking(whole, cycle_of)
    assert {LATE_AT, DUPLICATE_AT} <= relinking and len(relinking) < CYCLES - 2, relinking
    config, engine, before = engine_run.config(), Engine(), None
    judged: list[set[tuple[str, str]]] = []
    caplog.set_level(logging.INFO, logger="dgm.analyze")
    for cycle in range(CYCLES):
        keep = cycle_of <= cycle
        kept = spark.createDataFrame(whole.filter(pa.array(keep)))
        fingerprints = Fingerprints(kept)
        if before is not None:
            added = whole.filter(pa.array(keep & (cycle_of == cycle)))
            fingerprints = replace(fingerprints, before=before, added=spark.createDataFrame(added))
        caplog.clear()
        ours = engine.cycle(config, fingerprints, {}, FAR)
        assert cycle == 0 or "touched" in engine.last, engine.last
        rebuilt = Engine().cycle(config, Fingerprints(kept), {}, FAR)
        assert canonical_all(*ours) == canonical_all(*rebuilt), (cycle, engine.last)
        again_judged = "moved between streams" in caplog.text
        assert again_judged == (cycle in relinking), (cycle, caplog.text)
        assert "below their streams" not in caplog.text
        rows = ours[0]["out_of_order"].to_pylist()
        judged.append({(r["stream"], r["message_id"]) for r in rows if r["anomaly"] == SINK})
        before = kept
    # Partition 2's copies are judged once its records are read; the copy of the id held
    # twice is no longer.
    assert not any(s == "s/2" for s, _ in judged[LATE_AT - 1])
    assert any(s == "s/2" for s, _ in judged[LATE_AT])
    assert ("s/0", chosen) in judged[DUPLICATE_AT - 1]
    assert ("s/0", chosen) not in judged[DUPLICATE_AT]
