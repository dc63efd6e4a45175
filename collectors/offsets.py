"""Offsets sampler: log-start offset, high watermark and LSO of every monitored partition.

Three batched ListOffsets requests per cycle (librdkafka groups each by partition leader):
earliest, latest read_uncommitted (the high watermark) and latest read_committed (the LSO).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from collectors.clients import ClusterUnreachable
from collectors.lso import LsoState, advance, lso_lag, lso_stuck_ms
from collectors.partitions import PartitionInfo
from dgm.contracts.samples import Key, PartitionOffsets

# Partitions per ListOffsets call: measured 6,000 in one call at 0.7-1.2 s, in calls of 500
# to 1,000 at 0.3-0.5 s (bench/HISTORY.md,
# "Collectors: one sampling cycle"), and a failed call then costs less.
CHUNK = 1000


@dataclass(frozen=True)
class OffsetsRow:
    """One row of the `offsets` sample kind (see dgm.contracts.sample_schemas.OFFSETS)."""

    sampled_at: datetime
    cluster_id: str
    topic: str
    partition: int
    leader: int | None
    log_start_offset: int
    high_watermark: int
    lso: int
    lso_lag: int
    lso_since: datetime
    lso_stuck_ms: int
    topic_id: str | None
    leader_epoch: int | None


def offsets_rows(
    fetched: Sequence[PartitionOffsets],
    previous: Mapping[Key, LsoState],
    sampled_at: datetime,
    cluster_id: str,
    topic_ids: Mapping[str, str] | None = None,
) -> tuple[list[OffsetsRow], dict[Key, LsoState]]:
    """The sample's rows and the LSO state to carry to the next sample."""
    topic_ids = topic_ids or {}
    rows, states = [], {}
    for p in fetched:
        state = advance(previous.get((p.topic, p.partition)), p.lso, sampled_at)
        states[(p.topic, p.partition)] = state
        rows.append(
            OffsetsRow(
                sampled_at, cluster_id, p.topic, p.partition, p.leader,
                p.log_start_offset, p.high_watermark, p.lso,
                lso_lag(p.high_watermark, p.lso), state.since,
                lso_stuck_ms(state, p.high_watermark, sampled_at),
                topic_ids.get(p.topic), p.leader_epoch,
            )
        )  # fmt: skip
    return rows, states


def fetch_offsets(
    admin: AdminClient, partitions: Sequence[PartitionInfo], timeout_s: float
) -> tuple[list[PartitionOffsets], int]:
    """Offsets of `partitions`, and how many could not be read this time (no leader, ...).

    The three are separate requests, so not one snapshot. The high watermark is asked for
    only after the LSO has been answered: both only grow and LSO <= high watermark at any
    instant, so asked in this order LSO lag can never come out negative.
    """
    if not partitions:
        return [], 0
    deadline = time.monotonic() + timeout_s + 5
    first = _request(admin, partitions, timeout_s, {
        "log_start_offset": (OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED),  # type: ignore[no-untyped-call]
        "lso": (OffsetSpec.latest(), IsolationLevel.READ_COMMITTED),  # type: ignore[no-untyped-call]
    })  # fmt: skip
    results, last_error, _ = _gather(first, deadline)
    then = _request(admin, partitions, timeout_s, {
        "high_watermark": (OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED),  # type: ignore[no-untyped-call]
    })  # fmt: skip
    high_watermarks, hw_error, epochs = _gather(then, deadline)
    results.update(high_watermarks)
    fetched = [
        PartitionOffsets(
            p.topic, p.partition,
            results["log_start_offset"][key], results["high_watermark"][key], results["lso"][key],
            leader=p.leader, leader_epoch=epochs["high_watermark"].get(key),
        )
        for p in partitions
        if all((key := (p.topic, p.partition)) in found for found in results.values())
    ]  # fmt: skip
    if not fetched:
        raise ClusterUnreachable(f"list offsets: no partition answered ({hw_error or last_error})")
    return fetched, len(partitions) - len(fetched)


Requests = dict[str, dict[TopicPartition, "Future[object]"]]


def _request(
    admin: AdminClient,
    partitions: Sequence[PartitionInfo],
    timeout_s: float,
    specs: Mapping[str, tuple[OffsetSpec, IsolationLevel]],
) -> Requests:
    requests: Requests = {name: {} for name in specs}
    for name, (spec, isolation) in specs.items():
        for start in range(0, len(partitions), CHUNK):
            chunk = partitions[start : start + CHUNK]
            wanted = {TopicPartition(p.topic, p.partition): spec for p in chunk}
            try:
                requests[name].update(
                    admin.list_offsets(wanted, isolation_level=isolation, request_timeout=timeout_s)
                )
            except KafkaException as error:
                raise ClusterUnreachable(f"list offsets: {error.args[0].str()}") from None
    return requests


Answers = dict[str, dict[Key, int]]


def _gather(requests: Requests, deadline: float) -> tuple[Answers, str, Answers]:
    """Answers by request name and partition (a partition that failed is left out), the last
    error, and the leader epoch each answer came in, where the broker named one."""
    results: Answers = {name: {} for name in requests}
    epochs: Answers = {name: {} for name in requests}
    last_error = ""
    for name, futures in requests.items():
        for tp, future in futures.items():
            try:
                info = future.result(timeout=max(0.1, deadline - time.monotonic()))
            except (KafkaException, TimeoutError) as error:
                last_error = _describe(error)
                continue
            offset = int(info.offset)  # type: ignore[attr-defined]
            if offset < 0:
                # A leader still recovering from an unclean election answers OFFSET_INVALID
                # (-1001; seen on Kafka 4.1): no offset, as if it had not answered.
                last_error = f"no offset yet ({offset})"
                continue
            results[name][(tp.topic, tp.partition)] = offset
            epoch = getattr(info, "leader_epoch", None)
            if epoch is not None and epoch >= 0:
                epochs[name][(tp.topic, tp.partition)] = int(epoch)
    return results, last_error, epochs


def _describe(error: BaseException) -> str:
    if isinstance(error, KafkaException):
        return str(error.args[0].str())
    return "timed out"
