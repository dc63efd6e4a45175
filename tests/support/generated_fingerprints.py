"""Generated fingerprints of a pipeline that fails the way the lab's do, vectorised with numpy
so a million rows take seconds: the differential tests' data, and the benchmarks' (through
bench/generated.py).

A source whose producer restarts halfway (two sessions), loses 0.5% of its sends (sequence
gaps), retries 1% (source duplicates) and aborts 1% (aborted transactions), 0.5% without an
id; a processor that drops 0.5% (lost), writes 1% twice (reprocessing: same dgm-src), reads
half the aborted records (aborted reads) and aborts 0.3% of its own writes. The group
committed 95% of every source partition; the newest 1% lies within the grace period.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dgm.contracts.fingerprints import FINGERPRINT as ARROW_FINGERPRINT

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RECORDS_PER_SECOND = 50  # per pipeline: many timestamp ties


def _within_groups(keys: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... per distinct key, in the order rows come (a cumulative count)."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.r_[0, np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1]
    run_start = np.repeat(starts, np.diff(np.r_[starts, len(keys)]))
    counts = np.empty(len(keys), dtype=np.int64)
    counts[order] = np.arange(len(keys)) - run_start
    return counts


def _stamps(seconds: np.ndarray) -> pa.Array:
    micros = int(T0.timestamp()) * 1_000_000 + seconds.astype(np.int64) * 1_000_000
    return pa.array(micros, pa.timestamp("us", tz="UTC"))


def _table(topic: str, partition: np.ndarray, columns: dict[str, Any]) -> pa.Table:
    n = len(partition)
    data = {
        "topic": pa.array(np.full(n, topic)),
        "partition": pa.array(partition.astype(np.int32)),
        "offset": pa.array(_within_groups(partition)),
        "key": pa.nulls(n, pa.string()),
        "filtered_by": pa.nulls(n, pa.list_(pa.string())),
        "filter_undecided_by": pa.nulls(n, pa.list_(pa.string())),
        "arrived_at": pa.nulls(n, pa.timestamp("us", tz="UTC")),
        "arrival_resolution_us": pa.nulls(n, pa.int64()),
        **columns,
    }
    return pa.table({f.name: data[f.name] for f in ARROW_FINGERPRINT}, schema=ARROW_FINGERPRINT)


@dataclass
class Pipeline:
    name: str
    source: pa.Table
    sink: pa.Table
    committed: pa.Table  # (topic, partition, committed_offset)
    cutoff: datetime
    aborted_reads: int  # committed sink rows made from aborted source records with an id


def pipeline(
    name: str,
    sends: int,
    partitions: int,
    seed: int,
    topics: tuple[str, str] | None = None,
) -> Pipeline:
    """`sends` source sends through the failure model above; `topics` (source, sink) default
    to `s-<name>` and `k-<name>`."""
    rng = np.random.default_rng(seed)
    source_topic, sink_topic = topics or (f"s-{name}", f"k-{name}")
    number = np.arange(sends)
    partition = rng.integers(0, partitions, sends)
    session = (number >= sends // 2).astype(np.int64)
    seq = _within_groups(partition * 2 + session)
    copies = np.where(rng.random(sends) < 0.005, 0, 1)  # lost at the producer
    copies[rng.random(sends) < 0.01] = 2  # a retried send: the same seq twice
    keep = np.repeat(number, copies)
    committed = rng.random(sends) >= 0.01
    has_id = rng.random(sends) >= 0.005
    seconds = number // RECORDS_PER_SECOND
    cutoff = T0 + timedelta(seconds=int(seconds[int(sends * 0.99)]))
    ids = pc.binary_join_element_wise(f"{name}-", pa.array(number).cast(pa.string()), "")
    source = _table(
        source_topic,
        partition[keep],
        {
            "timestamp": _stamps(seconds[keep]),
            "message_id": pc.if_else(pa.array(has_id[keep]), ids.take(keep), None),
            "producer": pa.array(np.where(session[keep] == 0, f"{name}-a", f"{name}-b")),
            "seq": pa.array(seq[keep]),
            "lineage": pa.nulls(len(keep), pa.string()),
            "src_topic": pa.nulls(len(keep), pa.string()),
            "src_partition": pa.nulls(len(keep), pa.int32()),
            "src_offset": pa.nulls(len(keep), pa.int64()),
            "committed": pa.array(committed[keep]),
        },
    )
    rows = np.arange(len(keep))
    read = rows[committed[keep] | (rng.random(len(keep)) < 0.5)]
    written = np.repeat(read, np.where(rng.random(len(read)) < 0.005, 0, 1))
    written = np.r_[written, written[rng.random(len(written)) < 0.01]]
    aborted_writes = written[rng.random(len(written)) < 0.003]
    sink_committed = np.r_[np.ones(len(written), bool), np.zeros(len(aborted_writes), bool)]
    written = np.r_[written, aborted_writes]
    source_offsets = source["offset"].to_numpy()[written]
    source_partitions = partition[keep][written]
    lineage = pc.binary_join_element_wise(
        source_topic,
        pa.array(source_partitions).cast(pa.string()),
        pa.array(source_offsets).cast(pa.string()),
        "/",
    )
    sink = _table(
        sink_topic,
        rng.integers(0, partitions, len(written)),
        {
            "timestamp": _stamps(seconds[keep][written] + 1),
            "message_id": source["message_id"].take(written),
            "producer": pa.nulls(len(written), pa.string()),
            "seq": pa.nulls(len(written), pa.int64()),
            "lineage": lineage,
            "src_topic": pa.array(np.full(len(written), source_topic)),
            "src_partition": pa.array(source_partitions.astype(np.int32)),
            "src_offset": pa.array(source_offsets),
            "committed": pa.array(sink_committed),
        },
    )
    # An id is sent once, so its retried copies share the committed flag.
    from_aborted = ~committed[keep][written] & has_id[keep][written]
    aborted_reads = int(np.count_nonzero(from_aborted & sink_committed))
    # The group committed 95% of each source partition.
    ends = np.bincount(partition[keep], minlength=partitions)
    committed_offsets = pa.table(
        {
            "topic": [source_topic] * partitions,
            "partition": pa.array(range(partitions), pa.int32()),
            "committed_offset": pa.array((ends * 0.95).astype(np.int64), pa.int64()),
        }
    )
    return Pipeline(name, source, sink, committed_offsets, cutoff, aborted_reads)
