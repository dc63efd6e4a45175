"""Consumer-group sampler: state, members and assignments, committed offsets, lag two ways.

One ListGroups (librdkafka, every broker), one DescribeGroups and one OffsetFetch per
coordinator (kafka-python: group_requests says why). Share groups, with their start offsets in
the committed offsets' place, are asked beside the cycle (collectors/share_sampler.py) and
added by with_share_groups.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from confluent_kafka import ConsumerGroupState, ConsumerGroupType, KafkaException

from collectors import group_requests
from collectors.clients import Clients, ClusterUnreachable
from collectors.events import GroupView, MemberView
from collectors.lag import lag_from_hw, lag_from_lso
from collectors.share_group_requests import ShareGroupDescription
from collectors.share_groups import ShareSample, view
from dgm.clients.permissions import GROUP_DESCRIBE, Denial
from dgm.contracts.samples import Key, PartitionOffsets
from dgm.contracts.vocabulary import GroupType

# Kafka's own names for group states, as kafka-consumer-groups.sh prints them.
_STATE_NAMES = {
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}
_TYPE_NAMES = {
    ConsumerGroupType.CONSUMER: GroupType.CONSUMER.value,
    ConsumerGroupType.CLASSIC: GroupType.CLASSIC.value,
}


@dataclass(frozen=True)
class GroupMembersRow:
    """One row of the `group_members` sample kind (see
    dgm.contracts.sample_schemas.GROUP_MEMBERS)."""

    sampled_at: datetime
    cluster_id: str
    group_id: str
    group_state: str
    group_type: str
    assignor: str
    coordinator_id: int | None
    member_count: int
    member_id: str | None
    client_id: str | None
    host: str | None
    group_instance_id: str | None
    assignment: list[dict[str, Any]] | None


@dataclass(frozen=True)
class GroupOffsetsRow:
    """One row of the `group_offsets` sample kind (see
    dgm.contracts.sample_schemas.GROUP_OFFSETS)."""

    sampled_at: datetime
    cluster_id: str
    group_id: str
    topic: str
    partition: int
    committed_offset: int
    group_state: str
    member_id: str | None
    high_watermark: int | None
    lso: int | None
    lag_from_hw: int | None
    lag_from_lso: int | None
    group_type: str | None
    share_lag: int | None = None


@dataclass(frozen=True)
class GroupSample:
    views: dict[str, GroupView]  # by group id, for event derivation
    members: list[GroupMembersRow]
    committed: dict[str, dict[Key, int]]  # group id -> partition -> committed offset
    denied: tuple[Denial, ...] = ()  # groups the cluster refuses to describe
    # Share groups' share-partition lag (KIP-1226), where the broker tells it.
    share_lags: dict[str, dict[Key, int]] = field(default_factory=dict)

    @property
    def types(self) -> dict[str, str]:
        """Group id -> its group_type (GroupType), as its members' rows say."""
        return {row.group_id: row.group_type for row in self.members}


def group_offsets_rows(
    sample: GroupSample,
    offsets: Mapping[Key, PartitionOffsets],
    sampled_at: datetime,
    cluster_id: str,
) -> list[GroupOffsetsRow]:
    """Committed offsets of monitored partitions (those in `offsets`), with lag both ways."""
    rows, types = [], sample.types
    for group_id, committed in sorted(sample.committed.items()):
        share_lags = sample.share_lags.get(group_id, {})
        view = sample.views.get(group_id)
        owner = {
            tp: m.member_id for m in (view.members.values() if view else ()) for tp in m.assignment
        }
        for key, offset in sorted(committed.items()):
            partition = offsets.get(key)
            if partition is None:
                continue
            rows.append(
                GroupOffsetsRow(
                    sampled_at, cluster_id, group_id, key[0], key[1], offset,
                    view.state if view else "Unknown", owner.get(key),
                    partition.high_watermark, partition.lso,
                    lag_from_hw(partition.high_watermark, offset),
                    lag_from_lso(partition.lso, offset),
                    types.get(group_id),
                    share_lags.get(key),
                )
            )  # fmt: skip
    return rows


def fetch_groups(
    clients: Clients,
    timeout_s: float,
    sampled_at: datetime,
    cluster_id: str,
    expected: tuple[str, ...] = (),
) -> GroupSample:
    """Every group's state, members and committed offsets. ListGroups goes to every broker
    through librdkafka; the coordinator-bound requests through kafka-python (group_requests
    says why). ListGroups leaves out the groups dgm may not describe: the `expected` ones (the
    pipelines') it lacks are asked for by name, so a missing permission is a Denial."""
    return clients.using_python_admin(
        "groups", lambda: _fetch(clients, timeout_s, sampled_at, cluster_id, expected)
    )


def _fetch(
    clients: Clients,
    timeout_s: float,
    sampled_at: datetime,
    cluster_id: str,
    expected: tuple[str, ...],
) -> GroupSample:
    admin = clients.admin
    try:
        listed = admin.list_consumer_groups(request_timeout=timeout_s).result(timeout=timeout_s + 5)
    except (KafkaException, TimeoutError) as error:
        raise ClusterUnreachable(f"list groups: {_describe(error)}") from None
    kinds = {listing.group_id: listing.type for listing in listed.valid}
    group_ids = sorted(kinds)
    # A share group a pipeline names is unlisted here too: OffsetFetch finds nothing for it.
    unlisted = sorted(set(expected) - set(kinds))
    if not group_ids and not unlisted:
        return GroupSample({}, [], {})
    kip848 = [g for g in group_ids if kinds[g] == ConsumerGroupType.CONSUMER]
    classic = [g for g in group_ids if g not in set(kip848)]
    python_admin = clients.python_admin()
    views, members = {}, []
    for group_id, description in group_requests.describe_classic(python_admin, classic).items():
        views[group_id] = _classic_view(description)
        coordinator = group_requests.coordinator_of(python_admin, group_id)
        members.extend(_classic_rows(description, coordinator, sampled_at, cluster_id))
    if kip848:
        deadline = time.monotonic() + timeout_s + 5
        try:
            described = admin.describe_consumer_groups(kip848, request_timeout=timeout_s)
        except KafkaException as error:
            raise ClusterUnreachable(f"describe groups: {_describe(error)}") from None
        for group_id, future in described.items():
            description = _result(future, deadline)
            if description is not None:
                views[group_id] = _view(description)
                members.extend(_member_rows(description, sampled_at, cluster_id))
    denied: list[str] = []
    committed = group_requests.committed_offsets(python_admin, group_ids, denied)
    if unlisted:
        # Fetched apart: a refused one fails the batch, and must not cost the listed ones.
        found = group_requests.committed_offsets(python_admin, unlisted, denied)
        committed.update({g: offsets for g, offsets in found.items() if offsets})
    if group_ids and not views and not committed:
        raise ClusterUnreachable("describe groups: no group answered")
    return GroupSample(
        views, members, committed, tuple(Denial(GROUP_DESCRIBE, g) for g in sorted(denied))
    )


def with_share_groups(
    sample: GroupSample,
    share: ShareSample | None,
    carried: Mapping[str, GroupView],
    sampled_at: datetime,
    cluster_id: str,
) -> GroupSample:
    """`sample` with the cluster's share groups added (ListGroups without a type filter,
    librdkafka's, does not list them): `share`, as collectors/share_sampler.py asked it beside
    the cycle. Without an answer this cycle, the share groups add no rows and keep their
    `carried` views. A start offset read after the high watermark may pass it: lag_from_hw < 0."""
    if share is None:
        return replace(sample, views={**sample.views, **carried})
    if not share.descriptions and not share.partitions and not share.denied:
        return sample
    views = {**sample.views, **{g: view(s) for g, s in share.descriptions.items()}}
    members = [
        *sample.members,
        *(
            row
            for s in share.descriptions.values()
            for row in _share_rows(s, sampled_at, cluster_id)
        ),
    ]
    partitions = share.partitions.items()
    starts = {g: {k: p.start_offset for k, p in found.items()} for g, found in partitions}
    committed = {**sample.committed, **starts}
    lags = {g: {k: p.lag for k, p in found.items() if p.lag is not None} for g, found in partitions}
    refused = tuple(Denial(GROUP_DESCRIBE, g) for g in sorted(share.denied))
    return GroupSample(views, members, committed, (*sample.denied, *refused), lags)


def _classic_view(description: group_requests.Description) -> GroupView:
    members = {
        m["member_id"]: MemberView(m["member_id"], m.get("client_id"), group_requests.assignment(m))
        for m in description.get("members") or []
    }
    return GroupView(str(description.get("group_state") or "Unknown"), members)


def _classic_rows(
    description: group_requests.Description,
    coordinator: int | None,
    sampled_at: datetime,
    cluster_id: str,
) -> list[GroupMembersRow]:
    found = description.get("members") or []
    group = (
        sampled_at,
        cluster_id,
        str(description["group_id"]),
        str(description.get("group_state") or "Unknown"),
        GroupType.CLASSIC.value,
        str(description.get("protocol_data") or ""),
        coordinator,
        len(found),
    )
    if not found:
        return [GroupMembersRow(*group, None, None, None, None, None)]
    return [
        GroupMembersRow(
            *group, m["member_id"], m.get("client_id"), m.get("client_host"),
            m.get("group_instance_id"),
            [
                {"topic": t, "partition": p}
                for t, p in sorted(group_requests.assignment(m))
            ],
        )
        for m in found
    ]  # fmt: skip


def _share_rows(
    description: ShareGroupDescription, sampled_at: datetime, cluster_id: str
) -> list[GroupMembersRow]:
    group = (
        sampled_at, cluster_id, description.group_id, description.state, GroupType.SHARE.value,
        description.assignor, description.coordinator_id, len(description.members),
    )  # fmt: skip
    if not description.members:
        return [GroupMembersRow(*group, None, None, None, None, None)]
    return [
        GroupMembersRow(
            *group, m.member_id, m.client_id, m.host, None,
            [{"topic": t, "partition": p} for t, p in sorted(m.assignment)],
        )
        for m in description.members
    ]  # fmt: skip


def _result(future: Future[Any], deadline: float) -> Any:
    """A group's answer, or None if this group could not be read this cycle (it may be gone)."""
    try:
        return future.result(timeout=max(0.1, deadline - time.monotonic()))
    except (KafkaException, TimeoutError):
        return None


def _state(description: Any) -> str:
    return _STATE_NAMES.get(description.state, str(getattr(description.state, "name", "Unknown")))


def _assignment(member: Any) -> frozenset[Key]:
    assignment = member.assignment.topic_partitions if member.assignment else []
    return frozenset((tp.topic, tp.partition) for tp in assignment)


def _view(description: Any) -> GroupView:
    members = {
        m.member_id: MemberView(m.member_id, m.client_id, _assignment(m))
        for m in description.members
    }
    return GroupView(_state(description), members)


def _member_rows(description: Any, sampled_at: datetime, cluster_id: str) -> list[GroupMembersRow]:
    coordinator = description.coordinator.id if description.coordinator is not None else None
    group = (
        sampled_at,
        cluster_id,
        description.group_id,
        _state(description),
        _TYPE_NAMES.get(description.type, "unknown"),
        description.partition_assignor or "",
        coordinator,
        len(description.members),
    )
    if not description.members:
        return [GroupMembersRow(*group, None, None, None, None, None)]
    return [
        GroupMembersRow(
            *group, m.member_id, m.client_id, m.host, m.group_instance_id,
            [{"topic": t, "partition": p} for t, p in sorted(_assignment(m))],
        )
        for m in description.members
    ]  # fmt: skip


def _describe(error: BaseException) -> str:
    if isinstance(error, KafkaException):
        return str(error.args[0].str())
    return "timed out"
