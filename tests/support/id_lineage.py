"""Generated pipeline data for the id join (spark_jobs/analyze/lineage.py): a sink with the
awkward cases of sink order, the same sink without dgm-src, and the dgm-src a processor would
stamp restricted to the copies the id join can place."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dgm.contracts.fingerprints import FINGERPRINT as ARROW_FINGERPRINT
from spark_jobs.analyze.context import Context

LINEAGE = ("lineage", "src_topic", "src_partition", "src_offset")
GHOSTS = 3  # sink records whose id no source record holds
# k is written by p (from s) and q (from s2), k3 by r (from s3); ks is sampled (left out of
# the join), and an external sink has no log order.
ROUTES = Context(
    sources={"s": ("p", "t"), "s2": ("q",), "s3": ("r",)},
    sinks={"k": ("p", "q"), "k3": ("r",), "ks": ("t",), "external:p:tbl": ("p",)},
    source_topics={"p": ("s",), "q": ("s2",), "r": ("s3",), "t": ("s",)},
    plain_sources={},
    claimed={},
    sampled={"ks": 10},
)


def _renumbered(rows: pa.Table, start: int = 0) -> pa.Table:
    at = rows.schema.get_field_index("offset")
    offsets = pa.array(np.arange(start, start + rows.num_rows), pa.int64())
    return rows.set_column(at, rows.schema.field(at), offsets)


def restarted(sink: pa.Table, partition: int = 0, block: int = 30) -> pa.Table:
    """`sink` with its processor restarted halfway through `partition`: the `block` records
    before the middle written again there, going back in source position."""
    mine = sink.filter(pc.equal(sink["partition"], partition)).sort_by("offset")
    middle = mine.num_rows // 2
    again = pa.concat_tables(
        [mine.slice(0, middle), mine.slice(middle - block, block), mine.slice(middle)]
    )
    others = sink.filter(pc.not_equal(sink["partition"], partition))
    return pa.concat_tables([others, _renumbered(again)])


def with_ghosts(sink: pa.Table, partition: int = 1) -> pa.Table:
    """`sink` with GHOSTS committed records at the end of `partition` whose ids no source
    record holds, stamped as if made from early source records."""
    mine = sink.filter(pc.equal(sink["partition"], partition)).sort_by("offset")
    last = mine.slice(mine.num_rows - GHOSTS).to_pylist()
    start = mine["offset"][-1].as_py() + 1
    rows = [
        r | {"offset": start + n, "message_id": f"ghost-{n}", "committed": True,
             "lineage": f"{r['src_topic']}/0/{n}", "src_partition": 0, "src_offset": n}
        for n, r in enumerate(last)
    ]  # fmt: skip
    return pa.concat_tables([sink, pa.Table.from_pylist(rows, schema=ARROW_FINGERPRINT)])


def stripped(table: pa.Table) -> pa.Table:
    """`table` without dgm-src: what Kafka's own tools write."""
    for name in LINEAGE:
        at = table.schema.get_field_index(name)
        table = table.set_column(
            at, table.schema.field(at), pa.nulls(table.num_rows, table.schema.field(at).type)
        )
    return table


def held_once(source: pa.Table) -> set[str]:
    """The ids held by exactly one committed record of `source`."""
    ids = source.filter(source["committed"])["message_id"].drop_null().to_pylist()
    return {i for i, n in Counter(ids).items() if n == 1}


def placeable(sink: pa.Table, source: pa.Table) -> pa.Table:
    """`sink` keeping dgm-src only on the copies the id join places (their id held once
    in `source`): the same lineage, told by the processor."""
    keep = pc.is_in(sink["message_id"], pa.array(sorted(held_once(source)), pa.string()))
    keep = pc.fill_null(keep, False)
    for name in LINEAGE:
        at = sink.schema.get_field_index(name)
        field = sink.schema.field(at)
        sink = sink.set_column(at, field, pc.if_else(keep, sink[name], pa.scalar(None, field.type)))
    return sink
