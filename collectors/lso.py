"""LSO lag and stuck-LSO duration, derived from consecutive offset samples (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class LsoState:
    """What one partition's LSO was, and since which sample, as far as the collector saw."""

    lso: int
    since: datetime


def lso_lag(high_watermark: int, lso: int) -> int:
    """Records and control markers past the LSO: what read_committed consumers cannot read."""
    return high_watermark - lso


def advance(previous: LsoState | None, lso: int, sampled_at: datetime) -> LsoState:
    """The state after a sample: `since` moves only when the LSO moved."""
    if previous is not None and previous.lso == lso and previous.since <= sampled_at:
        return previous
    return LsoState(lso, sampled_at)


def lso_stuck_ms(state: LsoState, high_watermark: int, sampled_at: datetime) -> int:
    """How long the LSO has not moved while records sit above it; 0 when nothing does.

    An LSO that stays put with nothing above it is an idle partition, not a stuck one. The
    first sample of a partition counts from itself: the collector cannot know more.
    """
    if lso_lag(high_watermark, state.lso) <= 0:
        return 0
    return int((sampled_at - state.since).total_seconds() * 1000)
