"""The truth about pipelines that stamp no dgm header, from a plain read of their topics
(tests/support/truth.py): ids from the JSON value, sink order recomputed by the id join,
and the published duplicates rows to hold them against."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb

from tests.support.truth import Record
from tests.support.truth_records import Delivery


def id_of(record: Record) -> str:
    """The record's id: its JSON value's "id"."""
    value = json.loads(record.value or b"{}")
    return str(value["id"])


def sink_out_of_order(source: list[Record], sink: list[Record]) -> int:
    """Sink records behind in their stream (docs/design.md, "Order, beside the delivery
    semantic"): per sink partition and source partition, a record whose source offset (the
    one source record holding its id) is lower than the highest before it in the sink."""
    held = Counter(id_of(r) for r in source)
    position = {id_of(r): (r.partition, r.offset) for r in source if held[id_of(r)] == 1}
    highest: dict[tuple[int, int], int] = {}
    behind = 0
    for r in sorted(sink, key=lambda r: (r.partition, r.offset)):
        found = position.get(id_of(r))
        if found is None:
            continue
        stream = (r.partition, found[0])
        if found[1] < highest.get(stream, -1):
            behind += 1
        highest[stream] = max(highest.get(stream, -1), found[1])
    return behind


def duplicates_rows(database: Path, topic: str) -> list[dict[str, Any]]:
    """The published duplicates rows of `topic`, by id and copy."""
    with duckdb.connect(str(database), read_only=True) as db:
        cursor = db.execute(
            "SELECT * FROM duplicates WHERE topic = ? ORDER BY message_id, copy_number", [topic]
        )
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def delivery_by_json_id(source: list[Record], sink: list[Record]) -> Delivery:
    """truth_records.delivery of a pipeline without headers: ids from the JSON values."""
    copies: Counter[str] = Counter(id_of(r) for r in sink)
    return Delivery(len(source), frozenset(id_of(r) for r in source), frozenset(), copies)


def replayed_blocks(sink: list[Record]) -> list[tuple[int, int, int]]:
    """(partition, first, last offset) of each block of extra copies at consecutive offsets
    of a sink partition: a copy whose id an earlier offset of the topic already held."""
    seen: set[str] = set()
    blocks: list[tuple[int, int, int]] = []
    for r in sorted(sink, key=lambda r: (r.partition, r.offset)):
        message_id = id_of(r)
        if message_id in seen:
            last = blocks[-1] if blocks else None
            if last and last[0] == r.partition and last[2] == r.offset - 1:
                blocks[-1] = (last[0], last[1], r.offset)
            else:
                blocks.append((r.partition, r.offset, r.offset))
        seen.add(message_id)
    return blocks


def sink_behind(database: Path, topic: str) -> int:
    """The published sink-out-of-order records of `topic`."""
    with duckdb.connect(str(database), read_only=True) as db:
        found = db.execute(
            "SELECT count(*) FROM out_of_order WHERE topic = ? AND anomaly = 'sink out of order'",
            [topic],
        ).fetchone()
    return int(found[0]) if found else 0
