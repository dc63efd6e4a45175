"""What the re-read reads again (pure): around a backwards move, and a share walked down."""

from __future__ import annotations

from dgm.contracts.samples import PartitionOffsets
from spark_jobs.audit.reread import (
    SHARE,
    WENT_BACK,
    Reread,
    RereadState,
    below,
    plan_rereads,
    resume_at,
)


def sampled(partition: int = 0, start: int = 0, hw: int = 130, lso: int = 130) -> PartitionOffsets:
    return PartitionOffsets("t", partition, start, hw, lso)


def test_a_high_watermark_below_what_was_audited_is_read_from_as_far_below_it() -> None:
    # Audited to 150; the log now ends at 130: offsets from 130 - 20 on are read again.
    found, _ = plan_rereads([sampled()], {("t", 0): 150}, {}, {}, RereadState(), 0, 0.1)
    assert found == [Reread("t", 0, 110, 130, 130, 130, WENT_BACK)]


def test_a_recorded_move_back_is_read_even_once_the_log_grew_past_it() -> None:
    # The collectors saw 150 -> 100; the log has grown to 170 since.
    moved = {("t", 0): (100, 50)}
    found, _ = plan_rereads(
        [sampled(hw=170, lso=170)], {("t", 0): 150}, {}, moved, RereadState(), 0, 0.1
    )
    assert found == [Reread("t", 0, 50, 150, 170, 170, WENT_BACK)]


def test_the_share_is_owed_until_a_chunk_then_walks_down_from_the_newest() -> None:
    audited = {("t", 0): 50_000, ("t", 1): 50_000}
    offsets = [sampled(0, hw=60_000, lso=60_000), sampled(1, hw=60_000, lso=60_000)]
    found, state = plan_rereads(offsets, audited, {}, {}, RereadState(), 40_000, 0.1)
    assert found == [] and state.owed == 4_000  # less than a chunk: owed
    found, state = plan_rereads(offsets, audited, {}, {}, state, 60_000, 0.1)
    assert [(r.partition, r.start, r.end, r.why) for r in found] == [
        (0, 45_000, 50_000, SHARE),
        (1, 45_000, 50_000, SHARE),
    ]
    assert state.owed == 0 and state.cursors == {"t/0": 45_000, "t/1": 45_000}
    found, state = plan_rereads(offsets, audited, {("t", 0): 44_000}, {}, state, 100_000, 0.1)
    # Partition 0 is held from 44,000: its walk ends there and starts again from the newest.
    assert [(r.partition, r.start, r.end) for r in found] == [
        (0, 44_000, 45_000),
        (1, 40_000, 45_000),
    ]
    assert state.cursors == {"t/0": 50_000, "t/1": 40_000}


def test_below_doubles_down_to_the_floor_and_resume_never_passes_the_lso() -> None:
    window = Reread("t", 0, 110, 130, 130, 130, WENT_BACK)
    assert below(window, 0) == Reread("t", 0, 70, 110, 130, 130, WENT_BACK)
    assert below(window, 100) == Reread("t", 0, 100, 110, 130, 130, WENT_BACK)
    assert below(window, 110) is None
    assert resume_at(150, 100, 130) == 130
    assert resume_at(150, 100, 90) == 100  # an open transaction pins the LSO below it
    assert resume_at(120, 100, 130) == 120
