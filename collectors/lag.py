"""Consumer-group lag two ways (pure): from the high watermark and from the LSO."""

from __future__ import annotations


def lag_from_hw(high_watermark: int | None, committed_offset: int) -> int | None:
    """What other tools show: counts markers, aborted and open transactional records as lag."""
    return None if high_watermark is None else high_watermark - committed_offset


def lag_from_lso(lso: int | None, committed_offset: int) -> int | None:
    """Transaction-correct lag: what a read_committed consumer can still read.

    Negative when the group committed past the LSO, which only a read_uncommitted consumer
    can do; kept as is because it says so.
    """
    return None if lso is None else lso - committed_offset
