"""Events derived from two consecutive samples (pure): the faults a verdict weighs.

Rebalances and member changes come from group samples, epoch bumps from producer and
transaction samples, broker departures from cluster metadata, offsets going backwards from
the offsets samples, missing permissions from the calls the cluster refused, missing
capabilities from the brokers' API versions. Outages and collector starts are recorded by the
runner, which is the one that sees them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from collectors.txn_sessions import TxnSeen, new_session
from dgm.clients.capabilities import CAPABILITY_MISSING, CAPABILITY_RESTORED, Gap
from dgm.clients.permissions import AUTHORIZATION_FAILED, AUTHORIZATION_RESTORED, Denial
from dgm.contracts.samples import Key, PartitionOffsets

# Group states in which the group is moving partitions between members (classic and KIP-848).
REBALANCING = frozenset({"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"})


@dataclass(frozen=True)
class Event:
    """One row of the `events` sample kind (see dgm.contracts.sample_schemas.EVENTS)."""

    sampled_at: datetime
    cluster_id: str
    event: str
    detail: str
    group_id: str | None = None
    member_id: str | None = None
    client_id: str | None = None
    producer_id: int | None = None
    transactional_id: str | None = None
    broker_id: int | None = None
    before: int | None = None
    after: int | None = None
    topic: str | None = None
    partition: int | None = None
    leader_epoch: int | None = None


@dataclass(frozen=True)
class MemberView:
    member_id: str
    client_id: str
    assignment: frozenset[tuple[str, int]]


@dataclass(frozen=True)
class GroupView:
    state: str
    members: Mapping[str, MemberView]  # by member id


def group_events(
    previous: Mapping[str, GroupView],
    current: Mapping[str, GroupView],
    at: datetime,
    cluster_id: str,
) -> list[Event]:
    """Member joins and departures, and at most one rebalance per group, between samples.

    A rebalance is counted when the group enters a rebalancing state, or when assignments
    changed between two samples that both missed the rebalancing state (it was quicker than
    the interval). A group seen for the first time yields nothing: there is no before.
    """
    events: list[Event] = []
    for group_id in sorted(current.keys() & previous.keys()):
        before, after = previous[group_id], current[group_id]
        for member_id in sorted(after.members.keys() - before.members.keys()):
            member = after.members[member_id]
            events.append(
                Event(
                    at,
                    cluster_id,
                    "member_joined",
                    f"{member.client_id} joined {group_id}",
                    group_id=group_id,
                    member_id=member_id,
                    client_id=member.client_id,
                )
            )
        for member_id in sorted(before.members.keys() - after.members.keys()):
            member = before.members[member_id]
            events.append(
                Event(
                    at,
                    cluster_id,
                    "member_left",
                    f"{member.client_id} left {group_id}",
                    group_id=group_id,
                    member_id=member_id,
                    client_id=member.client_id,
                )
            )
        entered = after.state in REBALANCING and before.state not in REBALANCING
        reassigned = (
            _assignments(before) != _assignments(after)
            and before.state not in REBALANCING
            and bool(after.members)
        )
        if entered or reassigned:
            how = f"state {before.state} -> {after.state}" if entered else "assignment changed"
            events.append(
                Event(
                    at,
                    cluster_id,
                    "rebalance",
                    f"{group_id} rebalanced ({how})",
                    group_id=group_id,
                    before=len(before.members),
                    after=len(after.members),
                )
            )
    return events


def _assignments(group: GroupView) -> dict[str, frozenset[tuple[str, int]]]:
    return {member_id: member.assignment for member_id, member in group.members.items()}


def transactional_epoch_events(
    previous: Mapping[str, TxnSeen | tuple[int, int]],
    current: Mapping[str, TxnSeen | tuple[int, int]],
    at: datetime,
    cluster_id: str,
) -> list[Event]:
    """New producer sessions per transactional id; values are TxnSeen (collectors.txn_sessions),
    or (producer_id, producer_epoch) when nothing more is known.

    Under transactions V1 the coordinator bumps the epoch when a producer re-initialises (a
    restart fences the old session) or when it aborts a timed-out transaction; a new producer
    id counts too (handed out when the epoch runs out, fencing the old session). Under V2 the
    epoch is bumped by every transaction and a new producer id follows an exhausted epoch:
    one session continuing, told only when the coordinator shows a re-initialised or fenced
    producer (txn_sessions.new_session; docs/design.md, "Transactions V1 and V2").
    """
    events = []
    for transactional_id in sorted(current.keys() & previous.keys()):
        before, now = TxnSeen(*previous[transactional_id]), TxnSeen(*current[transactional_id])
        if not new_session(before, now):
            continue
        old_pid, old_epoch = before.producer_id, before.producer_epoch
        new_pid, new_epoch = now.producer_id, now.producer_epoch
        moved = f", producer id {old_pid} -> {new_pid}" if new_pid != old_pid else ""
        events.append(
            Event(
                at,
                cluster_id,
                "epoch_bump",
                f"{transactional_id}: epoch {old_epoch} -> {new_epoch}{moved}",
                producer_id=new_pid,
                transactional_id=transactional_id,
                before=old_epoch,
                after=new_epoch,
            )
        )
    return events


def idempotent_epoch_events(
    previous: Mapping[int, int],
    current: Mapping[int, int],
    at: datetime,
    cluster_id: str,
) -> list[Event]:
    """Epoch bumps of producers without a transactional id: producer id -> highest epoch."""
    return [
        Event(
            at,
            cluster_id,
            "epoch_bump",
            f"producer {pid}: epoch {previous[pid]} -> {epoch}",
            producer_id=pid,
            before=previous[pid],
            after=epoch,
        )
        for pid, epoch in sorted(current.items())
        if pid in previous and epoch > previous[pid]
    ]


def broker_events(
    previous: frozenset[int] | None, current: frozenset[int], at: datetime, cluster_id: str
) -> list[Event]:
    """Brokers that left or joined the cluster's metadata since the previous sample."""
    if previous is None:
        return []
    return [
        *(
            Event(
                at, cluster_id, "broker_left", f"broker {b} left the cluster metadata", broker_id=b
            )
            for b in sorted(previous - current)
        ),
        *(
            Event(
                at,
                cluster_id,
                "broker_joined",
                f"broker {b} joined the cluster metadata",
                broker_id=b,
            )
            for b in sorted(current - previous)
        ),
    ]


def topic_events(
    previous: Mapping[str, str], current: Mapping[str, str], at: datetime, cluster_id: str
) -> list[Event]:
    """Topics whose id changed since the previous sample: deleted and recreated under the same
    name. A topic seen for the first time, or gone, is no event."""
    return [
        Event(
            at,
            cluster_id,
            "topic_recreated",
            f"topic {topic} was deleted and recreated: id {previous[topic]} -> {topic_id}",
            topic=topic,
        )
        for topic, topic_id in sorted(current.items())
        if previous.get(topic) not in (None, topic_id)
    ]


# Offsets of a partition that only grow while its log is intact, and the event naming each
# one's move backwards (docs/design.md, "truncated record").
BACKWARDS = {
    "high_watermark": "high_watermark_backwards",
    "log_start_offset": "log_start_backwards",
    "lso": "lso_backwards",
}
_SAID = {"high_watermark": "high watermark", "log_start_offset": "log start offset", "lso": "LSO"}


def backwards_events(
    previous: Mapping[Key, PartitionOffsets],
    current: Iterable[PartitionOffsets],
    at: datetime,
    cluster_id: str,
    recreated: Iterable[str] = (),
) -> list[Event]:
    """One event per offset of a partition (high watermark, log start, LSO) that is lower than
    at the partition's previous sample: its log was truncated (an unclean leader election, a
    broker bug). Kafka never answers a lower high watermark across a clean election (KIP-207),
    so this is no leader change artefact. A partition seen for the first time, or of a topic
    `recreated` since (its offsets start again from 0), yields nothing."""
    skip = set(recreated)
    events = []
    for now in current:
        before = previous.get((now.topic, now.partition))
        if before is None or now.topic in skip:
            continue
        for field, event in BACKWARDS.items():
            old, new = getattr(before, field), getattr(now, field)
            if new >= old:
                continue
            epochs = (
                f" (leader epoch {before.leader_epoch} -> {now.leader_epoch})"
                if before.leader_epoch is not None and now.leader_epoch is not None
                else ""
            )
            events.append(
                Event(
                    at,
                    cluster_id,
                    event,
                    f"{now.topic}[{now.partition}]: {_SAID[field]} went back from {old} to "
                    f"{new}{epochs}",
                    before=old,
                    after=new,
                    topic=now.topic,
                    partition=now.partition,
                    leader_epoch=now.leader_epoch,
                )
            )
    return events


def authorization_events(
    previous: Iterable[Denial], current: Iterable[Denial], at: datetime, cluster_id: str
) -> list[Event]:
    """A refusal seen for the first time since the collector started (`authorization_failed`),
    and one no longer seen (`authorization_restored`), both with the Denial's line as detail:
    the dashboard and `dgm verdicts` show the failed lines not restored since the newest
    collector start (dgm.contracts.published_views.MISSING_PERMISSIONS)."""
    before, after = set(previous), set(current)
    return [
        *(denial_event(d, AUTHORIZATION_FAILED, at, cluster_id) for d in _sorted(after - before)),
        *(denial_event(d, AUTHORIZATION_RESTORED, at, cluster_id) for d in _sorted(before - after)),
    ]


def denial_event(denial: Denial, event: str, at: datetime, cluster_id: str) -> Event:
    resource, name = denial.permission.resource, denial.name or None
    return Event(
        at,
        cluster_id,
        event,
        denial.line(),
        group_id=name if resource == "group" else None,
        transactional_id=name if resource == "transactional id" else None,
        topic=name if resource == "topic" else None,
    )


def _sorted(denials: Iterable[Denial]) -> list[Denial]:
    return sorted(denials, key=lambda d: d.line())


def capability_events(
    previous: Iterable[Gap], current: Iterable[Gap], at: datetime, cluster_id: str
) -> list[Event]:
    """A capability gap seen for the first time since the collector started
    (`capability_missing`) and one no longer seen (`capability_restored`, e.g. after an
    upgrade), the Gap's line as detail: read as missing permissions are
    (dgm.contracts.published_views.MISSING_CAPABILITIES)."""
    before, after = set(previous), set(current)

    def told(gaps: set[Gap], event: str) -> list[Event]:
        return [Event(at, cluster_id, event, line) for line in sorted(g.line() for g in gaps)]

    return [*told(after - before, CAPABILITY_MISSING), *told(before - after, CAPABILITY_RESTORED)]
