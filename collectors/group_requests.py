"""The coordinator-bound group requests (DescribeGroups, OffsetFetch) through kafka-python.

librdkafka's coordinator-bound admin requests can abort the whole collector process when they
meet a broker restart (SIGABRT in rd_kafka_enq_once_del_source_return, librdkafka#4605): seen
3 times in a 7-minute 3-broker demo. kafka-python's admin client is plain Python: a failure
there is an exception, counted as the group not answering this cycle. Only groups of the
KIP-848 `consumer` protocol, which kafka-python cannot describe, are described by librdkafka.
"""

from __future__ import annotations

from typing import Any

from kafka.admin import KafkaAdminClient
from kafka.errors import GroupAuthorizationFailedError

from dgm.contracts.samples import Key

# kafka-python's answer for one group: a dict of DescribeGroups fields (see its docs).
Description = dict[str, Any]


def describe_classic(admin: KafkaAdminClient, group_ids: list[str]) -> dict[str, Description]:
    """Descriptions of classic groups by id; a group that could not be described is left out
    (it may be gone, or its coordinator moving). One request for all, then one per group if
    that one failed, so one bad group does not hide the others."""
    try:
        found = admin.describe_groups(group_ids)
    except Exception:  # kafka-python raises many kinds; retried one group at a time
        found = {}
        for group_id in group_ids:
            try:
                found.update(admin.describe_groups([group_id]))
            except Exception:  # this group does not answer this cycle
                continue
    return {g: d for g, d in found.items() if d.get("error") is None}


def committed_offsets(
    admin: KafkaAdminClient, group_ids: list[str], denied: list[str] | None = None
) -> dict[str, dict[Key, int]]:
    """Committed offsets by group (one OffsetFetch per coordinator); same fallback as above.
    The groups the cluster refuses to describe (GROUP_AUTHORIZATION_FAILED) are appended to
    `denied`: not an outage, a missing permission."""
    try:
        found = admin.list_group_offsets(dict.fromkeys(group_ids))
    except Exception:  # retried one group at a time
        found = {}
        for group_id in group_ids:
            try:
                found.update(admin.list_group_offsets({group_id: None}))
            except GroupAuthorizationFailedError:
                if denied is not None:
                    denied.append(group_id)
            except Exception:  # this group does not answer this cycle
                continue
    return {
        group_id: {
            (tp.topic, tp.partition): int(meta.offset)
            for tp, meta in offsets.items()
            if meta is not None and meta.offset is not None and meta.offset >= 0
        }
        for group_id, offsets in found.items()
    }


def coordinator_of(admin: KafkaAdminClient, group_id: str) -> int | None:
    """The group's coordinator as kafka-python last found it; None when it does not say."""
    try:
        from kafka.protocol.metadata import CoordinatorType

        found = admin._manager.cluster.get_coordinator(group_id, CoordinatorType.GROUP)
    except Exception:  # a private detail of kafka-python: without it, the column is null
        return None
    return int(found) if isinstance(found, int | str) and str(found).lstrip("-").isdigit() else None


def assignment(member: dict[str, Any]) -> frozenset[Key]:
    """The partitions a classic group member (kafka-python's description) is assigned."""
    assigned = (member.get("member_assignment") or {}).get("assigned_partitions") or []
    return frozenset((a["topic"], int(p)) for a in assigned for p in a.get("partitions", []))
