"""Fingerprint rows as per_id works on them: pandas with integer codes for the strings it
groups, joins and filters by (topic, message id, pipeline), taken once per pipeline of their
topic (per_pipeline), names put back on output rows (named).

Grouping on Arrow-backed strings cost per_id most of its time (factorizing and taking them
on every filter: bench/HISTORY.md, "The rebuild within 3x DuckDB at 10M"); codes are plain
integers. Topic and pipeline codes sort as their names do, so orders that break ties by name
are unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.analyze.output import NO_TIME

ABSENT = -1  # a null message id, no pipeline, or a topic this partition does not hold


@dataclass(frozen=True)
class Names:
    """The names behind one partition's topic codes and one Context's pipeline codes."""

    topics: np.ndarray  # code -> topic name (object array, sorted)
    pipelines: np.ndarray  # code -> pipeline name (object array, sorted)

    @staticmethod
    def of(topics: Iterable[str], pipelines: Iterable[str]) -> Names:
        return Names(_names(topics), _names(pipelines))

    def topic(self, name: str | None) -> int:
        return _code(self.topics, name)

    def pipeline(self, name: str | None) -> int:
        return _code(self.pipelines, name)

    def by_topic(self, mapping: Mapping[str, tuple[str, ...]]) -> dict[int, tuple[int, ...]]:
        """A Context map of topic -> pipelines in codes, for the topics held here."""
        coded = {self.topic(t): tuple(self.pipeline(p) for p in ps) for t, ps in mapping.items()}
        return {t: ps for t, ps in coded.items() if t != ABSENT}

    def topic_names(self, codes: pd.Series) -> np.ndarray:
        named: np.ndarray = self.topics[codes.to_numpy(dtype="int64")]
        return named

    def pipeline_names(self, codes: pd.Series) -> np.ndarray:
        """Names for codes, None for ABSENT."""
        names = np.array([*self.pipelines, None], dtype=object)  # ABSENT (-1): the last
        named: np.ndarray = names[codes.to_numpy(dtype="int64")]
        return named


def _names(values: Iterable[str]) -> np.ndarray:
    return np.array(sorted(set(values)), dtype=object)


def _code(names: np.ndarray, name: str | None) -> int:
    if name is None or len(names) == 0:
        return ABSENT
    at = int(np.searchsorted(names, name))
    return at if at < len(names) and names[at] == name else ABSENT


def frame_of(batch: pa.Table, pipelines: Iterable[str]) -> tuple[pd.DataFrame, Names]:
    """Fingerprint rows (per_id.COLUMNS) as pandas, and the Names of their codes: `topic` and
    `message_id` as codes (message_id ABSENT when null), `ts` in micros (NO_TIME when null,
    which sorts first as Spark's ascending order does), `has_ts`, `has_id` and `_row` (output
    rows take the record's own columns from `batch` by it)."""
    topics = batch.column("topic").combine_chunks().dictionary_encode()
    held = topics.dictionary.to_pylist()
    names = Names.of(held, pipelines)
    rank = np.searchsorted(names.topics, np.array(held, dtype=object))  # code -> sorted code
    stamp = batch.column("timestamp").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    ids = batch.column("message_id").combine_chunks()
    frame = pd.DataFrame(
        {
            "topic": rank[topics.indices.to_numpy()],
            "partition": batch.column("partition").to_numpy(),
            "offset": batch.column("offset").to_numpy(),
            "has_ts": pc.is_valid(stamp).to_numpy(),
            "ts": pc.fill_null(stamp, NO_TIME).to_numpy(),
            "message_id": pc.fill_null(
                ids.dictionary_encode().indices.cast(pa.int64()), ABSENT
            ).to_numpy(),
            "committed": batch.column("committed").to_numpy(),
        }
    )
    frame["_row"] = np.arange(len(frame))
    frame["has_id"] = frame["message_id"] != ABSENT
    return frame, names


def marked(batch: pa.Table, column: str, names: Names) -> pd.Index:
    """The (pipeline code, row) pairs a list column of pipeline names (filtered_by,
    filter_undecided_by; or its names joined by commas) marks, as one integer each
    (pipeline * 2**32 + row); pipelines this Context does not know are left out."""
    lists = batch.column(column).combine_chunks()
    if pa.types.is_string(lists.type) or pa.types.is_large_string(lists.type):
        lists = pc.split_pattern(lists, ",")  # as passes.by_id ships them: joined by commas
    if lists.null_count == len(lists):
        return pd.Index([], dtype="int64")
    rows = pc.list_parent_indices(lists).to_numpy().astype("int64")
    flat = pc.list_flatten(lists).to_numpy(zero_copy_only=False)
    named, at = np.unique(flat.astype(object), return_inverse=True)
    codes = np.array([names.pipeline(n) for n in named], dtype="int64")[at]
    known = codes != ABSENT
    return pd.Index(codes[known] * 2**32 + rows[known])


def row_pairs(rows: pd.DataFrame) -> pd.Index:
    """(pipeline code, _row) of rows per pipeline as one integer, to match `marked`'s pairs."""
    return pd.Index(rows["pipeline"].to_numpy(dtype="int64") * 2**32 + rows["_row"].to_numpy())


def per_pipeline(
    frame: pd.DataFrame, by_topic: Mapping[Any, tuple[Any, ...]], dtype: str = "object"
) -> pd.DataFrame:
    """`frame`'s rows once per pipeline `by_topic` names for their topic, with `pipeline`
    (of `dtype`: names, or codes as Names.by_topic gives them)."""
    # A filter per (topic, pipeline), not a merge: the pairs are few, and a join on the
    # topic strings cost a quarter of per_id's time.
    parts = [
        frame[frame["topic"] == topic].assign(pipeline=name)
        for topic, names in by_topic.items()
        for name in names
    ]
    if not parts:
        return frame.iloc[0:0].assign(pipeline=pd.Series(dtype=dtype))
    return pd.concat(parts, ignore_index=True)


def named(rows: pd.DataFrame, names: Names) -> pd.DataFrame:
    """`rows` with topic and pipeline names in place of their codes."""
    columns = {}
    if "topic" in rows:
        columns["topic"] = names.topic_names(rows["topic"])
    if "pipeline" in rows:
        columns["pipeline"] = names.pipeline_names(rows["pipeline"])
    return rows.assign(**columns)


def distinct(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """`frame.drop_duplicates(columns)`: the first row of each combination, in order. The
    columns travel as one integer key where they fit in 63 bits (hashing one column, not
    factorizing several: a fifth of the time on a 1M-row partition)."""
    key = _key(frame, columns)
    if key is None:
        return frame.drop_duplicates(columns)
    return frame[~pd.Series(key).duplicated().to_numpy()]


def repeated(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """Per row of `frame`: does its combination of `columns` occur in another row too."""
    key = _key(frame, columns)
    if key is None:
        return frame.duplicated(columns, keep=False).to_numpy()  # type: ignore[no-any-return]
    return pd.Series(key).duplicated(keep=False).to_numpy()  # type: ignore[no-any-return]


def _key(frame: pd.DataFrame, columns: list[str]) -> np.ndarray | None:
    """One int64 per row, equal exactly where all `columns` are (None when their codes'
    ranges multiply past 2**62). Small non-negative integers (topic, pipeline and message
    id codes) are their own codes; other columns (windows' micros) are factorized."""
    n = len(frame)
    key, span = np.zeros(n, np.int64), 1
    for column in columns:
        values = frame[column].to_numpy()
        dense = values.dtype.kind in "iu" and (n == 0 or 0 <= values.min() <= values.max() <= 4 * n)
        codes = (
            values.astype(np.int64)
            if dense
            else pd.factorize(values, use_na_sentinel=False)[0].astype(np.int64)
        )
        size = int(codes.max()) + 1 if n else 1
        if span > 2**62 // size:
            return None
        key, span = key * size + codes, span * size
    return key
