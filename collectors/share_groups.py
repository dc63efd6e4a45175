"""Share-group sampler (KIP-932): state, members and assignments, and each share-partition's
start offset, as rows of the group sample kinds with `group_type` 'share'.

A share group commits no offsets. What stands in for its committed offset is the
share-partition start offset (SPSO): every record below it is acknowledged or archived, so a
pipeline whose consumer is a share group claims those records (docs/design.md, "claim").
Records acknowledged above the SPSO, while earlier ones are still in flight, are not claimed
until the SPSO passes them: Kafka's admin API does not show them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kafka.admin import KafkaAdminClient
from kafka.errors import GroupAuthorizationFailedError

from collectors import share_group_requests as requests
from collectors.events import GroupView, MemberView
from dgm.contracts.samples import Key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShareSample:
    descriptions: dict[str, requests.ShareGroupDescription] = field(default_factory=dict)
    partitions: dict[str, dict[Key, requests.SharePartition]] = field(default_factory=dict)
    denied: tuple[str, ...] = ()  # share groups whose offsets the cluster refuses to show
    failed: bool = False  # the requests failed: nothing is known of the share groups


_warned: set[str] = set()


def fetch_share_groups(admin: KafkaAdminClient) -> ShareSample:
    """Every share group's description and start offsets; an empty sample where the cluster
    has no share groups (a capability gap, said by the capabilities, not here). A group that
    does not answer this cycle is left out, like a consumer group; so are all of them when
    the requests fail, which must not cost the consumer groups' sample (logged once)."""
    try:
        return _fetch(admin)
    except Exception as error:  # kafka-python raises many kinds; none stops the sampler
        told = f"{type(error).__name__}: {error}"
        if told not in _warned:
            _warned.add(told)
            log.warning("share groups not sampled this cycle: %s", told)
        return ShareSample(failed=True)


def _fetch(admin: KafkaAdminClient) -> ShareSample:
    if not requests.answers_share_groups(admin):
        return ShareSample()
    group_ids = requests.list_share_groups(admin)
    if not group_ids:
        return ShareSample()
    descriptions = requests.describe_share_groups(admin, group_ids)
    offsets: dict[str, dict[Key, requests.SharePartition]] = {}
    denied: list[str] = []
    try:
        offsets = requests.share_partitions(admin, group_ids)
    except GroupAuthorizationFailedError:  # one refused group fails the batch: ask each
        for group_id in group_ids:
            try:
                offsets.update(requests.share_partitions(admin, [group_id]))
            except GroupAuthorizationFailedError:
                denied.append(group_id)
    return ShareSample(descriptions, offsets, tuple(denied))


def view(description: requests.ShareGroupDescription) -> GroupView:
    """The group as the events derivation compares it between samples (joins, departures)."""
    return GroupView(
        description.state,
        {
            m.member_id: MemberView(m.member_id, m.client_id, m.assignment)
            for m in description.members
        },
    )
