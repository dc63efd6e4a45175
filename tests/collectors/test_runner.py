from __future__ import annotations

from collectors.runner import MAX_DELAY_S
from dgm.util.waiting import next_delay


def test_backoff_doubles_up_to_the_cap() -> None:
    delays, delay = [], None
    for _ in range(10):
        delay = next_delay(delay, first=0.5, cap=8)
        delays.append(delay)
    assert delays == [0.5, 1, 2, 4, 8, 8, 8, 8, 8, 8]
    assert next_delay(10_000.0) == MAX_DELAY_S
