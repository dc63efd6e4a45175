"""How long each step of an analysis cycle took, for its progress line."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from pyspark import InheritableThread

Timings = dict[str, float]  # seconds per step of a cycle
T = TypeVar("T")


@contextmanager
def timed(timings: Timings, step: str) -> Iterator[None]:
    began = time.perf_counter()
    try:
        yield
    finally:
        timings[step] = time.perf_counter() - began


class Beside(Generic[T]):
    """`work` run in a thread beside the caller's, timed as `step`: its Spark jobs run while
    the caller's do, and take the cores those leave idle (a stage's last tasks, the driver's
    own work between jobs). The thread inherits the caller's Spark job group."""

    def __init__(self, work: Callable[[], T], timings: Timings, step: str) -> None:
        self._done: list[T] = []
        self._failed: list[BaseException] = []

        def run() -> None:
            try:
                with timed(timings, step):
                    self._done.append(work())
            except BaseException as error:  # handed to the caller by `result`
                self._failed.append(error)

        self._thread = InheritableThread(target=run)
        self._thread.start()

    def wait(self) -> None:
        self._thread.join()

    def result(self) -> T:
        """What `work` returned, once it has (or what it raised)."""
        self.wait()
        if self._failed:
            raise self._failed[0]
        return self._done[0]
