from __future__ import annotations

from collectors.hanging import CoordinatorView, OpenTransaction, hanging_reason, is_candidate

MAX = 60_000
NOW = 1_000_000
TXN = OpenTransaction("orders", 3, producer_id=42, producer_epoch=5, last_timestamp_ms=NOW - 61_000)
KNOWN = CoordinatorView(42, 5, frozenset({("orders", 3)}))


def test_a_recent_transaction_is_never_a_candidate() -> None:
    recent = OpenTransaction("orders", 3, 42, 5, NOW - 59_000)
    assert not is_candidate(recent, NOW, MAX)
    assert hanging_reason(recent, NOW, MAX, None, None) is None  # even if unknown


def test_a_candidate_its_coordinator_owns_is_left_to_the_coordinator() -> None:
    assert is_candidate(TXN, NOW, MAX)
    assert hanging_reason(TXN, NOW, MAX, "tx-1", KNOWN) is None


def test_unknown_producer_id_is_hanging() -> None:
    reason = hanging_reason(TXN, NOW, MAX, None, None)
    assert reason is not None and "no transactional id holds producer id 42" in reason


def test_unknown_transactional_id_is_hanging() -> None:
    reason = hanging_reason(TXN, NOW, MAX, "tx-1", None)
    assert reason is not None and "'tx-1' is unknown to its coordinator" in reason


def test_coordinator_on_a_newer_epoch_is_hanging() -> None:
    newer = CoordinatorView(42, 6, frozenset({("orders", 3)}))
    reason = hanging_reason(TXN, NOW, MAX, "tx-1", newer)
    assert reason is not None and "epoch 6" in reason


def test_coordinator_transaction_without_the_partition_is_hanging() -> None:
    elsewhere = CoordinatorView(42, 5, frozenset({("orders", 4)}))
    reason = hanging_reason(TXN, NOW, MAX, "tx-1", elsewhere)
    assert reason is not None and "does not include this partition" in reason


def test_a_transaction_its_coordinator_is_ending_is_not_hanging() -> None:
    # Seen on a real broker: the coordinator bumps the epoch before the abort marker lands.
    aborting = CoordinatorView(42, 6, frozenset(), state="PrepareAbort")
    assert hanging_reason(TXN, NOW, MAX, "tx-1", aborting) is None
    done = CoordinatorView(42, 6, frozenset(), state="CompleteAbort")
    assert hanging_reason(TXN, NOW, MAX, "tx-1", done) is not None  # ended, yet still open
