"""How long each step of an analysis cycle took, for its progress line."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from pyspark import InheritableThread, SparkContext

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
    own work between jobs). The thread inherits the caller's Spark job group. With
    `behind` (a SparkContext), its jobs wait for the caller's first: Spark runs the tasks of
    the job submitted first first (FIFO), so the caller's jobs keep the cores."""

    def __init__(
        self,
        work: Callable[[], T],
        timings: Timings,
        step: str,
        behind: SparkContext | None = None,
    ) -> None:
        self._done: list[T] = []
        self._failed: list[BaseException] = []
        after = _next_job(behind) if behind is not None else None

        def run() -> None:
            try:
                with timed(timings, step):
                    if after is not None:
                        after()
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


def _next_job(spark: SparkContext, timeout_s: float = 5.0) -> Callable[[], None]:
    """A wait, until a job of the caller's job group submitted after this call exists (or
    `timeout_s` passed: the caller failed before it submitted one)."""
    tracker = spark.statusTracker()
    group = spark.getLocalProperty("spark.jobGroup.id")  # None: the jobs of no group
    known = set(tracker.getJobIdsForGroup(group))

    def wait() -> None:
        deadline = time.monotonic() + timeout_s
        while not set(tracker.getJobIdsForGroup(group)) - known and time.monotonic() < deadline:
            time.sleep(0.01)

    return wait
