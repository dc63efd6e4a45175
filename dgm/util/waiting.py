"""Wait on a condition with a deadline, never on a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class TimedOut(AssertionError):
    pass


def wait_until(
    condition: Callable[[], T | None],
    timeout: float,
    what: str,
    interval: float = 0.1,
) -> T:
    """Call `condition` until it returns something truthy, and return that; else raise TimedOut."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = condition()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise TimedOut(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def next_delay(previous: float | None, first: float = 0.5, cap: float = 30.0) -> float:
    """Exponential backoff: `first`, then doubling, never above `cap`."""
    return first if previous is None else min(cap, previous * 2)
