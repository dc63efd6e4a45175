"""Shaping shared by the analysis modules: contract conformance and keeping the
frame several published tables share."""

from __future__ import annotations

import contextlib
import weakref
from typing import TypeVar

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dgm import published as tables

T = TypeVar("T")

# The contract's SQL types as Spark types.
SPARK_TYPES = {
    "VARCHAR": "string",
    "BIGINT": "bigint",
    "INTEGER": "int",
    "DOUBLE": "double",
    "BOOLEAN": "boolean",
    "TIMESTAMPTZ": "timestamp",
    "VARCHAR[]": "array<string>",
}


class Shared:
    """The frames one analyze run keeps in the executors. Each table frame it returns holds
    this object; when the last of them is garbage collected (after publish), the frames are
    freed. A frame derived from a table frame does not hold it: keep the table frame alive."""

    def __init__(self) -> None:
        self.frames: list[DataFrame] = []
        finalizer = weakref.finalize(self, _unpersist, self.frames)
        finalizer.atexit = False  # the JVM may be gone by then, and so are its caches

    def checkpoint(self, frame: DataFrame) -> DataFrame:
        """`frame` computed now and kept in the executors, its plan cut: a query over it is
        planned in milliseconds, where over a persisted frame each re-analyzed the whole
        plan below it (~0.6 s per table at demo size, bench/README.md)."""
        kept = frame.localCheckpoint(eager=True)
        self.frames.append(kept)
        return kept

    def hold(self, frames: dict[str, T]) -> dict[str, T]:
        """`frames`, each DataFrame among them holding this object (other values pass)."""
        for frame in frames.values():
            if isinstance(frame, DataFrame):
                frame._dgm_shared = self  # type: ignore[attr-defined]
        return frames


def _unpersist(frames: list[DataFrame]) -> None:
    for frame in frames:
        with contextlib.suppress(Exception):  # a stopped session has nothing left to free
            frame.unpersist(blocking=False)
            # A checkpointed frame's rows are its plan's RDD, which unpersist does not free.
            plan = frame._jdf.queryExecution().analyzed()
            if plan.nodeName() == "LogicalRDD":
                plan.rdd().unpersist(False)


def conform(frame: DataFrame, table: tables.Table) -> DataFrame:
    """`frame` with exactly `table`'s columns, in order and of its types (null when absent)."""
    present = set(frame.columns)  # each `frame.columns` asks the JVM for the whole schema
    return frame.select(
        *(
            (F.col(c.name) if c.name in present else F.lit(None))
            .cast(SPARK_TYPES[c.sql_type])
            .alias(c.name)
            for c in table.columns
        )
    )
