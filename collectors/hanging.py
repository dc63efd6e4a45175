"""Hanging transactions, decided the way Kafka's `kafka-transactions.sh find-hanging` does (pure).

A partition's open transaction is a candidate when its producer has not written for longer
than the maximum transaction timeout (the broker's transaction.max.timeout.ms): by then the
coordinator should have aborted it. A candidate is hanging when its coordinator cannot end
it: no transactional id holds the producer id, the transactional id is unknown, the
coordinator has moved on to a newer epoch, or its transaction does not include the
partition. A candidate the coordinator still knows as its own is left to the coordinator.

One deviation, seen on a real broker: while a coordinator writes the markers that end a
transaction (PrepareCommit, PrepareAbort, PrepareEpochFence) it may already hold the bumped
epoch while the partition still shows the transaction open. That is a transaction being
ended, not a hanging one, so it is not flagged.
"""

from __future__ import annotations

from dataclasses import dataclass

# Kafka's default transaction.max.timeout.ms (15 minutes), used when the broker's is unknown.
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 900_000
# Coordinator states in which it is writing the markers that end the transaction.
ENDING = frozenset({"PrepareCommit", "PrepareAbort", "PrepareEpochFence"})


@dataclass(frozen=True)
class OpenTransaction:
    """A producer with an open transaction on a partition (from DescribeProducers)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    last_timestamp_ms: int


@dataclass(frozen=True)
class CoordinatorView:
    """What the transaction coordinator says about a transactional id (DescribeTransactions)."""

    producer_id: int
    producer_epoch: int
    partitions: frozenset[tuple[str, int]]
    state: str = "Ongoing"


def is_candidate(txn: OpenTransaction, now_ms: int, max_transaction_timeout_ms: int) -> bool:
    return now_ms - txn.last_timestamp_ms > max_transaction_timeout_ms


def hanging_reason(
    txn: OpenTransaction,
    now_ms: int,
    max_transaction_timeout_ms: int,
    transactional_id: str | None,
    coordinator: CoordinatorView | None,
) -> str | None:
    """Why `txn` is hanging, or None when it is not (yet)."""
    if not is_candidate(txn, now_ms, max_transaction_timeout_ms):
        return None
    idle = f"idle {(now_ms - txn.last_timestamp_ms) / 1000:.0f}s"
    if transactional_id is None:
        return f"{idle}; no transactional id holds producer id {txn.producer_id}"
    if coordinator is None:
        return f"{idle}; transactional id {transactional_id!r} is unknown to its coordinator"
    if coordinator.state in ENDING:
        return None
    if coordinator.producer_epoch > txn.producer_epoch:
        return (
            f"{idle}; the coordinator is at epoch {coordinator.producer_epoch}, "
            f"the partition's transaction at {txn.producer_epoch}"
        )
    if (txn.topic, txn.partition) not in coordinator.partitions:
        return f"{idle}; the coordinator's transaction does not include this partition"
    return None
