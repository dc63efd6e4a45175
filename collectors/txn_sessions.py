"""Transactional producer sessions under transactions V1 and V2 (KIP-890), told from what the
coordinator says of each transactional id at each sample (DescribeTransactions); pure.

V1 (every 3.x broker, librdkafka, Java clients before 4.0): a session keeps one producer id and
epoch; the coordinator bumps the epoch only when a producer (re)initialises, fencing the one
before it, or when it aborts a timed-out transaction. V2 (a 4.x broker whose
`transaction.version` is 2, with Java clients 4.0+): the epoch is bumped at the end of every
transaction, and a producer id whose epoch runs out is followed by a new one, so the epoch is a
transaction counter, not a session. Which protocol a transactional id speaks is decided by its
client and the broker, so it is learned per transactional id, from the samples:
- V2: one transaction (the same start time) seen open at epoch e, then committing (PrepareCommit,
  CompleteCommit) at e + 1. A V1 commit never bumps the epoch.
- V1: two different transactions (different start times) seen in the same phase (both open, or
  both committed) at one producer id and epoch, in any two samples (the last of each phase is
  kept). Under V2 each transaction has its own epoch.
Until one of these is seen, the cluster decides: on a cluster whose `transaction.version` is
below 2 (or unknown) every transactional id speaks V1; on one at 2 the V2 reading applies (a
client that speaks V1 there keeps its epoch across transactions, so it is told V1 within a
few samples).

An epoch move (or a new producer id) is a new session, fencing the one before it, under V1; under
V2 only when the coordinator shows a re-initialised producer (Empty: after its first
transaction a V2 id is Empty only after InitProducerId) or one being fenced (PrepareEpochFence),
or when the move ended a transaction seen open past its timeout (the coordinator aborted it,
fencing its producer, under both).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import NamedTuple

V1, V2 = 1, 2
OPEN = "Ongoing"
COMMITTING = frozenset({"PrepareCommit", "CompleteCommit"})
COMMITTED = "CompleteCommit"
# A V2 transactional id in one of these after an epoch move was re-initialised or fenced.
REINITIALISED = frozenset({"Empty", "PrepareEpochFence"})


class TxnSeen(NamedTuple):
    """What the coordinator said of a transactional id at one sample."""

    producer_id: int
    producer_epoch: int
    state: str = ""  # "" when not known (then the V1 reading applies)
    start_ms: int | None = None  # when the current or last transaction began
    protocol: int | None = None  # V1, V2, or None until told (docs/design.md)
    cluster_v2: bool = False  # the cluster's transaction.version is 2 or more
    # (producer id, epoch, start) of the last transaction seen open, and seen committed
    last_open: tuple[int, int, int] | None = None
    last_committed: tuple[int, int, int] | None = None
    timed_out: bool = False  # open for longer than its transaction timeout


def seen_of(
    producer_id: int,
    producer_epoch: int,
    state: str,
    start: datetime | None,
    transaction_version: int | None = None,
    timed_out: bool = False,
) -> TxnSeen:
    start_ms = None if start is None else int(start.timestamp() * 1000)
    cluster_v2 = transaction_version is not None and transaction_version >= V2
    return TxnSeen(
        producer_id, producer_epoch, state, start_ms, None, cluster_v2, timed_out=timed_out
    )


def learned(before: TxnSeen, now: TxnSeen) -> int | None:
    """The protocol the samples tell (see module), else what was known before."""
    if (
        now.producer_id == before.producer_id
        and before.start_ms is not None
        and now.start_ms == before.start_ms
        and before.state == OPEN
        and now.state in COMMITTING
        and now.producer_epoch == before.producer_epoch + 1
    ):
        return V2
    last = {OPEN: before.last_open, COMMITTED: before.last_committed}.get(now.state)
    if (
        last is not None
        and now.start_ms is not None
        and last[:2] == (now.producer_id, now.producer_epoch)
        and last[2] != now.start_ms
    ):
        return V1
    return before.protocol


def _phase(seen: TxnSeen, state: str) -> tuple[int, int, int] | None:
    if seen.state != state or seen.start_ms is None:
        return None
    return (seen.producer_id, seen.producer_epoch, seen.start_ms)


def carried(before: Mapping[str, TxnSeen], now: Mapping[str, TxnSeen]) -> dict[str, TxnSeen]:
    """`now`, each transactional id with the protocol learned so far and the last transaction
    seen in each phase."""
    found = {}
    for txn_id, seen in now.items():
        was = before.get(txn_id)
        if was is None:
            found[txn_id] = seen._replace(
                last_open=_phase(seen, OPEN), last_committed=_phase(seen, COMMITTED)
            )
            continue
        found[txn_id] = seen._replace(
            protocol=learned(was, seen),
            last_open=_phase(seen, OPEN) or was.last_open,
            last_committed=_phase(seen, COMMITTED) or was.last_committed,
        )
    return found


def new_session(before: TxnSeen, now: TxnSeen) -> bool:
    """Whether the move from `before` to `now` (carrying its learned protocol) is a new
    producer session fencing the one before it (or a coordinator abort, under V1)."""
    if (now.producer_id, now.producer_epoch) == (before.producer_id, before.producer_epoch):
        return False
    if before.producer_epoch < 0:
        # No producer held the id yet: the coordinator shows epoch -1 between handing a new
        # transactional id its producer id and the first InitProducerId's epoch 0.
        return False
    if now.producer_id == before.producer_id and now.producer_epoch < before.producer_epoch:
        return False  # an older answer seen late, not a move
    if before.timed_out:
        return True  # the coordinator aborted it and fenced its producer, under both
    v2 = now.protocol == V2 or (now.protocol is None and now.cluster_v2)
    return not v2 or now.state in REINITIALISED
