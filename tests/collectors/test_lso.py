from __future__ import annotations

from datetime import UTC, datetime, timedelta

from collectors.lso import LsoState, advance, lso_lag, lso_stuck_ms

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_lso_lag_is_high_watermark_minus_lso() -> None:
    assert lso_lag(17, 12) == 5
    assert lso_lag(12, 12) == 0


def test_since_moves_only_when_the_lso_moves() -> None:
    first = advance(None, 12, at(0))
    assert first == LsoState(12, at(0))
    assert advance(first, 12, at(10)) is first
    assert advance(first, 18, at(20)) == LsoState(18, at(20))


def test_stuck_counts_while_records_sit_above_the_lso() -> None:
    state = advance(advance(None, 12, at(0)), 12, at(30))
    assert lso_stuck_ms(state, high_watermark=17, sampled_at=at(30)) == 30_000
    # Nothing above the LSO: an idle partition, not a stuck one.
    assert lso_stuck_ms(state, high_watermark=12, sampled_at=at(30)) == 0


def test_first_sample_counts_from_itself() -> None:
    assert lso_stuck_ms(advance(None, 12, at(5)), 17, at(5)) == 0


def test_a_clock_going_back_restarts_the_count_instead_of_going_negative() -> None:
    state = advance(LsoState(12, at(60)), 12, at(0))
    assert state == LsoState(12, at(0))
    assert lso_stuck_ms(state, 17, at(0)) == 0
