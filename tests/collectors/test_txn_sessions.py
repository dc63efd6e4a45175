"""Transactions V1 and V2 told apart per transactional id, and what is a new producer session
under each (collectors.txn_sessions; docs/design.md, "Transactions V1 and V2")."""

from __future__ import annotations

from datetime import UTC, datetime

from collectors.events import transactional_epoch_events
from collectors.txn_sessions import V1, V2, TxnSeen, carried, learned, new_session

AT = datetime(2026, 11, 28, tzinfo=UTC)


def seen(pid: int, epoch: int, state: str, start: int, protocol: int | None = None) -> TxnSeen:
    return TxnSeen(pid, epoch, state, start, protocol)


def told(*samples: TxnSeen) -> int | None:
    """The protocol learned from `samples` of one transactional id, in order."""
    found = carried({}, {"tx": samples[0]})
    for sample in samples[1:]:
        found = carried(found, {"tx": sample})
    return found["tx"].protocol


def test_a_commit_that_bumps_the_epoch_is_v2() -> None:
    assert learned(seen(5, 3, "Ongoing", 100), seen(5, 4, "CompleteCommit", 100)) == V2
    assert learned(seen(5, 3, "Ongoing", 100), seen(5, 4, "PrepareCommit", 100)) == V2
    # An abort at e + 1 is V2's end of a transaction and V1's coordinator abort alike: untold.
    assert learned(seen(5, 3, "Ongoing", 100), seen(5, 4, "CompleteAbort", 100)) is None


def test_two_transactions_at_one_epoch_are_v1() -> None:
    assert told(seen(5, 3, "Ongoing", 100), seen(5, 3, "Ongoing", 200)) == V1
    assert told(seen(5, 3, "CompleteCommit", 100), seen(5, 3, "CompleteCommit", 200)) == V1
    # Not in a row: the last transaction seen open is kept.
    one_epoch = [seen(5, 3, "Ongoing", 100), seen(5, 3, "CompleteCommit", 100)]
    assert told(*one_epoch, seen(5, 3, "Ongoing", 200)) == V1
    # V2's next transaction runs at the epoch its predecessor's commit left: no V1 proof.
    assert told(seen(5, 4, "CompleteCommit", 100), seen(5, 4, "Ongoing", 200)) is None
    bumped = [seen(5, 3, "Ongoing", 100), seen(5, 4, "CompleteCommit", 100)]
    assert told(*bumped, seen(5, 4, "Ongoing", 200)) == V2
    # One transaction seen twice proves nothing.
    assert told(seen(5, 3, "Ongoing", 100), seen(5, 3, "Ongoing", 100)) is None


def test_what_was_learned_is_carried() -> None:
    before = {"tx": seen(5, 3, "Ongoing", 100, V2), "other": seen(6, 0, "Ongoing", 1)}
    now = {"tx": seen(5, 9, "Ongoing", 900), "new": seen(7, 0, "Empty", -1)}
    found = carried(before, now)
    assert set(found) == {"tx", "new"}
    assert (found["tx"].protocol, found["tx"].last_open) == (V2, (5, 9, 900))
    assert found["new"].protocol is None


def test_the_cluster_decides_until_told() -> None:
    on_v2_cluster = TxnSeen(5, 9, "Ongoing", 900, None, cluster_v2=True)
    assert not new_session(seen(5, 3, "Ongoing", 100), on_v2_cluster)
    assert new_session(seen(5, 3, "Ongoing", 100), on_v2_cluster._replace(protocol=V1))
    assert new_session(seen(5, 3, "Ongoing", 100), on_v2_cluster._replace(cluster_v2=False))


def test_v2_epochs_and_producer_id_rollover_continue_one_session() -> None:
    before = seen(5, 3, "Ongoing", 100, V2)
    assert not new_session(before, seen(5, 17, "CompleteCommit", 800, V2))
    assert not new_session(before, seen(5, 17, "CompleteAbort", 800, V2))
    # The epoch ran out: a new producer id at epoch 0, the same transactional id.
    assert not new_session(seen(5, 32766, "Ongoing", 100, V2), seen(9, 0, "Ongoing", 900, V2))
    # Re-initialised (a restart's InitProducerId) or being fenced: a new session.
    assert new_session(before, seen(5, 5, "Empty", 100, V2))
    assert new_session(before, seen(5, 4, "PrepareEpochFence", 100, V2))


def test_v1_and_untold_epoch_moves_are_new_sessions() -> None:
    assert new_session(seen(5, 3, "CompleteCommit", 100, V1), seen(5, 4, "Ongoing", 900, V1))
    assert new_session(seen(5, 3, "Ongoing", 100), seen(5, 4, "Ongoing", 900))
    assert new_session(seen(5, 3, "Ongoing", 100), seen(8, 0, "Empty", -1))
    assert not new_session(seen(5, 3, "Ongoing", 100), seen(5, 3, "CompleteCommit", 100))
    assert not new_session(seen(5, 4, "Ongoing", 100), seen(5, 3, "Ongoing", 100))


def test_events_name_new_sessions_only() -> None:
    before = {"v1": seen(1, 0, "Ongoing", 10, V1), "v2": seen(2, 0, "Ongoing", 10, V2)}
    after = {"v1": seen(1, 1, "Ongoing", 20, V1), "v2": seen(2, 9, "Ongoing", 20, V2)}
    events = transactional_epoch_events(before, after, AT, "c")
    assert [(e.transactional_id, e.before, e.after) for e in events] == [("v1", 0, 1)]


def test_a_transaction_past_its_timeout_ended_by_the_coordinator_is_a_new_session() -> None:
    late = TxnSeen(5, 3, "Ongoing", 100, V2, cluster_v2=True, timed_out=True)
    assert new_session(late, TxnSeen(5, 4, "CompleteAbort", 100, V2, cluster_v2=True))


def test_a_new_transactional_ids_first_epoch_is_no_new_session() -> None:
    """A sample may catch a new transactional id at epoch -1, its producer id handed out but
    its first InitProducerId not yet done (a 3.6.2 broker, once): epoch 0 fences nobody."""
    for protocol in (None, V1, V2):
        assert not new_session(seen(3, -1, "Empty", -1), seen(3, 0, "Empty", -1, protocol))
        assert not new_session(seen(3, -1, "Empty", -1), seen(3, 0, "Ongoing", 100, protocol))
    events = transactional_epoch_events(
        {"tx": seen(3, -1, "Empty", -1)}, {"tx": seen(3, 0, "Ongoing", 100)}, AT, "c"
    )
    assert events == []
