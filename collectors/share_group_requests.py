"""The share-group admin requests (KIP-932) through kafka-python, which has their API keys but
not their messages: ListGroups filtered to share groups, ShareGroupDescribe (state, members,
assignments) and DescribeShareGroupOffsets (each share-partition's start offset, and from v1,
Kafka 4.2 on, its lag: KIP-1226).

confluent-kafka's AdminClient (2.16) neither lists share groups by type nor describes them. The
messages are built from wire descriptions kept beside this module (collectors/share_messages);
both requests go to the group's coordinator, like DescribeGroups and OffsetFetch
(collectors/group_requests.py).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from kafka.admin import KafkaAdminClient
from kafka.errors import for_code
from kafka.protocol.api_message import ApiMessage

from collectors import share_messages
from dgm.contracts.samples import Key
from dgm.contracts.vocabulary import GroupType


class ShareGroupDescribeRequest(ApiMessage, load_json=share_messages):  # type: ignore[misc,call-arg]
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=share_messages):  # type: ignore[misc,call-arg]
    pass


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=share_messages):  # type: ignore[misc,call-arg]
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=share_messages):  # type: ignore[misc,call-arg]
    pass


# ShareGroupDescribe v0 was 4.0's early access, removed in 4.1; dgm reads v1 only.
DESCRIBE_MIN_VERSION = 1


@dataclass(frozen=True)
class ShareMember:
    member_id: str
    client_id: str
    host: str
    assignment: frozenset[Key]


@dataclass(frozen=True)
class SharePartition:
    start_offset: int  # every record below it is acknowledged or archived
    # Records from the start offset to the end not yet acknowledged or archived, as the
    # broker counts them (KIP-1226); None where it does not (DescribeShareGroupOffsets v0).
    lag: int | None


@dataclass(frozen=True)
class ShareGroupDescription:
    group_id: str
    state: str  # Empty, Stable, Dead (Kafka's share-group states)
    assignor: str
    coordinator_id: int | None
    members: tuple[ShareMember, ...]


def answers_share_groups(admin: KafkaAdminClient) -> bool:
    """Whether the cluster speaks ShareGroupDescribe v1 and DescribeShareGroupOffsets: brokers
    from 4.1 (share groups were a preview there and are GA from 4.2)."""
    versions = admin._manager.broker_version_data  # kafka-python's ApiVersions of the cluster
    try:
        described = versions.api_version(ShareGroupDescribeRequest)
        versions.api_version(DescribeShareGroupOffsetsRequest)
    except Exception:  # IncompatibleBrokerVersion: the broker lacks the request
        return False
    return int(described) >= DESCRIBE_MIN_VERSION


def list_share_groups(admin: KafkaAdminClient) -> list[str]:
    """Ids of the cluster's share groups (ListGroups v5 with a type filter, every broker)."""
    listed = admin.list_groups(types_filter=[GroupType.SHARE.value])
    return sorted({str(g["group_id"]) for g in listed})


def describe_share_groups(
    admin: KafkaAdminClient, group_ids: list[str]
) -> dict[str, ShareGroupDescription]:
    """Descriptions by group id; a group the coordinator answers with an error (gone, moving,
    refused) is left out, like a classic group that does not answer."""
    if not group_ids:
        return {}
    return dict(admin._manager.run(_describe, admin, group_ids))


def share_partitions(
    admin: KafkaAdminClient, group_ids: list[str]
) -> dict[str, dict[Key, SharePartition]]:
    """Each group's share-partitions: the start offset (every record below it is acknowledged
    or archived, as every record below a consumer group's committed offset is processed) and
    the lag. A share-partition not yet initialised (start offset -1) is left out."""
    if not group_ids:
        return {}
    return dict(admin._manager.run(_share_partitions, admin, group_ids))


async def _by_coordinator(admin: KafkaAdminClient, group_ids: list[str]) -> dict[int, list[str]]:
    found = await admin._find_coordinator_ids(group_ids)
    grouped: dict[int, list[str]] = defaultdict(list)
    for group_id, node_id in found.items():
        grouped[int(node_id)].append(group_id)
    return grouped


async def _describe(
    admin: KafkaAdminClient, group_ids: list[str]
) -> dict[str, ShareGroupDescription]:
    described = {}
    for node_id, ids in (await _by_coordinator(admin, group_ids)).items():
        request = ShareGroupDescribeRequest(
            group_ids=ids, include_authorized_operations=False, min_version=DESCRIBE_MIN_VERSION
        )
        response = await admin._manager.send(request, node_id=node_id)
        for group in response.groups:
            if group.error_code == 0:
                described[group.group_id] = _description(group, node_id)
    return described


async def _share_partitions(
    admin: KafkaAdminClient, group_ids: list[str]
) -> dict[str, dict[Key, SharePartition]]:
    offsets: dict[str, dict[Key, SharePartition]] = {}
    for node_id, ids in (await _by_coordinator(admin, group_ids)).items():
        groups = [
            DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(
                group_id=g, topics=None
            )
            for g in ids
        ]
        response = await admin._manager.send(
            DescribeShareGroupOffsetsRequest(groups=groups), node_id=node_id
        )
        for group in response.groups:
            if group.error_code != 0:
                _raise_refusal(group.error_code, group.group_id)
                continue
            offsets[group.group_id] = {
                (topic.topic_name, int(p.partition_index)): SharePartition(
                    int(p.start_offset), int(p.lag) if getattr(p, "lag", -1) >= 0 else None
                )
                for topic in group.topics
                for p in topic.partitions
                if p.error_code == 0 and p.start_offset >= 0
            }
    return offsets


def _raise_refusal(error_code: int, group_id: str) -> None:
    """A refused group raises (the caller counts it as a missing permission); any other error
    is this group not answering this cycle."""
    error = for_code(error_code)
    if error.__name__ == "GroupAuthorizationFailedError":
        raise error(f"DescribeShareGroupOffsets refused for group {group_id!r}")


def _description(group: Any, coordinator_id: int) -> ShareGroupDescription:
    members = tuple(
        ShareMember(
            str(m.member_id),
            str(m.client_id),
            str(m.client_host),
            frozenset(
                (str(tp.topic_name), int(p))
                for tp in m.assignment.topic_partitions
                for p in tp.partitions
            ),
        )
        for m in group.members
    )
    return ShareGroupDescription(
        str(group.group_id), str(group.group_state), str(group.assignor_name), coordinator_id,
        members,
    )  # fmt: skip
