"""The truth about pipelines that filter, re-key or keep no offsets in Kafka: a plain
confluent-kafka read of every record of the source and the sink (read_committed), without dgm's
analysis and without the lab's own accounting, recomputing the application's declared rule."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from tests.support.truth import Record


def dropped_by_rule(record: Record) -> bool:
    """The Streams application's declared filter, recomputed: a JSON value whose integer "n"
    is a multiple of ten is not delivered."""
    try:
        value = json.loads(record.value or b"")
    except ValueError:
        return False
    n = value.get("n") if isinstance(value, dict) else None
    return isinstance(n, int) and not isinstance(n, bool) and n % 10 == 0


@dataclass(frozen=True)
class Delivery:
    """What a pipeline delivered: source ids by the dgm-id header, sink ids by `sink_id`."""

    source: int  # committed source records
    expected: frozenset[str]  # source ids the pipeline is meant to deliver
    dropped: frozenset[str]  # source ids its declared rule excludes
    sink_copies: Counter[str]  # sink id -> copies

    @property
    def lost(self) -> frozenset[str]:
        return self.expected - set(self.sink_copies)

    @property
    def duplicates(self) -> int:
        """Extra copies of expected ids in the sink."""
        return sum(n - 1 for i, n in self.sink_copies.items() if i in self.expected)

    @property
    def unexpected(self) -> frozenset[str]:
        """Sink ids that are no expected source id (a dropped record let through, or junk)."""
        return frozenset(self.sink_copies) - self.expected


def delivery(
    source: list[Record], sink: list[Record], sink_by_key: bool, filtered: bool
) -> Delivery:
    dropped = {r.header_id for r in source if filtered and dropped_by_rule(r)}
    expected = {r.header_id for r in source} - dropped
    copies: Counter[str] = Counter(
        (r.key or b"").decode() if sink_by_key else r.header_id for r in sink
    )
    return Delivery(len(source), frozenset(expected), frozenset(dropped), copies)
