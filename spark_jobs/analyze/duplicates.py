"""Duplicates and their causes: the rules, as pure functions of pandas frames that per_id
applies inside each partition of the fingerprints shuffled by message id.

The words are docs/design.md's: a **duplicate** is a committed record whose message id already
appeared at an earlier committed offset in the same topic; the duplicate rate is extra
copies / distinct ids. Across partitions "earlier" means earlier by (timestamp, partition,
offset), which is also how the first copy is chosen. Aborted and unidentified records are
never copies; they are counted on their own.

A cause's evidence: the sink-side causes are values repeated among an id's copies in one
topic (a send: producer and dgm-seq; a source record: dgm-src); the source-side ones count
the id's records in the pipeline's source topics (upstream: two committed; aborted read:
none committed, some aborted). Which source topics those are is per_id's to work out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dgm.contracts.vocabulary import DuplicateCause
from spark_jobs.analyze.id_frame import repeated

# Causes, in precedence order: when several apply to one id, the first one listed names it.
# - aborted read: the id should not be in the sink at all (the source holds it only in
#   aborted transactions), whatever else then copied it;
# - producer retry: the very same send (producer session and dgm-seq) sits at two offsets;
#   a retried send also repeats its dgm-src, so this must win over reprocessing;
# - reprocessing: the same source record (dgm-src) was processed into two sink copies;
# - upstream: only id-level evidence that the source itself held the id twice.
# With none of them: DuplicateCause.UNKNOWN (e.g. a pipeline stamping nothing).
CAUSES = (
    DuplicateCause.ABORTED_READ,
    DuplicateCause.PRODUCER_RETRY,
    DuplicateCause.REPROCESSING,
    DuplicateCause.UPSTREAM,
)


def copies(frame: pd.DataFrame) -> pd.DataFrame:
    """Every committed, identified copy of an id held more than once in a topic, with
    `copies` and `copy_number` (1 for the first by timestamp, partition, offset) and
    `is_extra_copy` (every copy but the first: a duplicate). `frame`: per_id's rows
    (id_frame.frame_of: topic, message_id, ts, partition, offset, committed, has_id, _row)."""
    kept = frame[frame["committed"] & frame["has_id"]]
    held = kept[repeated(kept, ["topic", "message_id"])]
    count = held.groupby(["topic", "message_id"])["_row"].transform("size")
    ordered = held.assign(copies=count).sort_values(
        ["topic", "message_id", "ts", "partition", "offset"]
    )
    numbered = ordered.groupby(["topic", "message_id"]).cumcount() + 1
    return ordered.assign(copy_number=numbered, is_extra_copy=numbered > 1)


def _repeats(values: pd.Series, keys: list[pd.Series]) -> pd.Series:
    """Per key: does a non-null value occur more than once (count > count distinct)."""
    grouped = values.groupby(keys)
    return grouped.count() > grouped.nunique()


def sink_evidence(
    copied: pd.DataFrame, producer: pd.Series, seq: pd.Series, lineage: pd.Series
) -> pd.DataFrame:
    """(topic, message_id, repeated_send, repeated_source) per duplicated id of `copied`
    (`copies` rows): whether one send (producer and dgm-seq: evidence of a producer retry)
    or one source record (dgm-src, `lineage`: of reprocessing) repeats among its copies.
    The three series are the copies' own values, indexed as `copied`."""
    keys = [copied["topic"], copied["message_id"]]
    send = producer + "\u0000" + seq.astype("Int64").astype(str)
    send = send.where(producer.notna() & seq.notna())
    evidence = pd.DataFrame(
        {"repeated_send": _repeats(send, keys), "repeated_source": _repeats(lineage, keys)}
    ).reset_index()
    evidence.columns = ["topic", "message_id", "repeated_send", "repeated_source"]
    return evidence


def cause(
    committed_copies: pd.Series,
    records: pd.Series,
    repeated_send: pd.Series,
    repeated_source: pd.Series,
) -> np.ndarray:
    """The cause of each duplicated id (of a pipeline's sink), by CAUSES' precedence:
    `committed_copies` and `records` are the id's committed records and records in the
    pipeline's source topics; the other two are `sink_evidence`'s."""
    upstream = committed_copies > 1
    aborted = (committed_copies == 0) & (records > 0)
    chosen: np.ndarray = np.select(
        [aborted, repeated_send, repeated_source, upstream],
        [c.value for c in CAUSES],
        DuplicateCause.UNKNOWN.value,
    )
    return chosen
