"""CopyBatches reads each copy's batch once, keeps what was found while the copy is asked
for, and forgets a copy no longer asked for (its duplicate went, e.g. with retention)."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from spark_jobs.analyze.copy_batches import FOUND, CopyBatches


class Log:
    """A reader over a dict of batches by coordinates (a log's batches, as copy_producers
    answers them: one row per copy found), remembering what it was asked."""

    def __init__(self, batches: dict[tuple[str, int, int], tuple[int, int, int]]) -> None:
        self.batches = batches
        self.asked: list[list[tuple[str, int, int]]] = []

    def __call__(self, asked: pa.Table) -> pa.Table:
        keys = list(
            zip(*(asked[c].to_pylist() for c in ("topic", "partition", "offset")), strict=True)
        )
        self.asked.append(keys)
        rows = [(*k, *self.batches[k]) for k in keys if k in self.batches]
        return pa.table({c: [r[i] for r in rows] for i, c in enumerate(FOUND)})


def copies(*keys: tuple[str, int, int]) -> pd.DataFrame:
    return pd.DataFrame(keys, columns=["topic", "partition", "offset"])


def found(frame: pd.DataFrame) -> set[tuple[object, ...]]:
    return set(frame[FOUND].itertuples(index=False, name=None))


def test_each_copy_is_read_once_and_forgotten_when_no_longer_asked_for() -> None:
    log = Log({("t", 0, 5): (7, 0, 41), ("t", 1, 9): (8, 2, 3)})
    batches = CopyBatches(log)
    first = batches.of(copies(("t", 0, 5), ("t", 0, 6), ("t", 0, 5)))
    assert found(first) == {("t", 0, 5, 7, 0, 41)}
    assert log.asked == [[("t", 0, 5), ("t", 0, 6)]]  # each copy once, in order
    # Asked again with one more: only the new one is read; ("t", 0, 6) has no batch and is
    # not read again either.
    second = batches.of(copies(("t", 0, 6), ("t", 1, 9), ("t", 0, 5)))
    assert found(second) == {("t", 0, 5, 7, 0, 41), ("t", 1, 9, 8, 2, 3)}
    assert log.asked[1:] == [[("t", 1, 9)]]
    # ("t", 0, 5) is no longer a duplicate copy: forgotten, so read again if it comes back.
    third = batches.of(copies(("t", 1, 9)))
    assert found(third) == {("t", 1, 9, 8, 2, 3)}
    assert len(batches.asked) == 1
    batches.of(copies(("t", 0, 5)))
    assert log.asked[2:] == [[("t", 0, 5)]]


def test_without_a_reader_nothing_is_found() -> None:
    assert CopyBatches().of(copies(("t", 0, 1))).empty
