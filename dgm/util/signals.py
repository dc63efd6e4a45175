"""How dgm's long-running commands take SIGINT and SIGTERM."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def stop_on_signals(
    stop: threading.Event, again: Callable[[], None] | None = None
) -> Iterator[None]:
    """For the block, SIGINT and SIGTERM set `stop` (the loop finishes what it writes, then
    returns); a repeated one calls `again` (say we are on it, or raise KeyboardInterrupt to
    abandon the work in progress). The previous handlers come back after the block."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if stop.is_set() and again is not None:
            again()
        stop.set()

    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def interrupt_on_signals() -> dict[int, object]:
    """SIGTERM raises KeyboardInterrupt like SIGINT does: a blocking start-up step (the broker,
    a download) is abandoned and the cleanup runs. The previous handlers, to restore."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    return {s: signal.signal(s, handler) for s in STOP_SIGNALS}


def interrupt() -> None:
    """An `again` for stop_on_signals: a second Ctrl-C abandons the work in progress."""
    raise KeyboardInterrupt


def please_wait(say: Callable[[str], None]) -> Callable[[], None]:
    """An `again` for stop_on_signals: a second Ctrl-C is told the stop is under way."""
    return lambda: say("stopping; please wait")
