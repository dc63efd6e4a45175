"""Which ids the watch has read, and whether a record makes its id a duplicate (a committed
record whose id already appeared at another committed offset of the same topic; docs/
design.md, "Definitions"). Pure: no Kafka here."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Copy:
    """Where one copy of an id lies, ordered as duplicates.copy_number orders copies."""

    timestamp_ms: int
    partition: int
    offset: int


@dataclass(frozen=True)
class Duplicate:
    """An id's first copy and an extra one (later by `Copy`'s order)."""

    first: Copy
    extra: Copy


class SeenIds:
    """The first copy of every id held, per (pipeline, topic); at most `max_ids` of them, the
    one seen longest ago forgotten first (its later copies then wait for the analysis)."""

    def __init__(self, max_ids: int) -> None:
        if max_ids < 1:
            raise ValueError(f"max_ids must be 1 or more, got {max_ids}")
        self.max_ids = max_ids
        self._first: OrderedDict[tuple[str, str, str], Copy] = OrderedDict()

    def __len__(self) -> int:
        return len(self._first)

    def see(self, pipeline: str, topic: str, message_id: str, copy: Copy) -> Duplicate | None:
        """Note `copy` of `message_id`; the duplicate it makes, if any. Each extra copy is
        told once, against the id's first copy: a copy older than the first one held makes
        that one the extra copy. The same record read again (a re-read) is no duplicate."""
        key = (pipeline, topic, message_id)
        first = self._first.get(key)
        if first is None:
            self._first[key] = copy
            if len(self._first) > self.max_ids:
                self._first.popitem(last=False)
            return None
        self._first.move_to_end(key)
        if (first.partition, first.offset) == (copy.partition, copy.offset):
            return None
        if copy < first:
            self._first[key] = copy
            return Duplicate(first=copy, extra=first)
        return Duplicate(first=first, extra=copy)
