"""Which topic-partitions the collectors watch: all topics by default, include/exclude regexes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient

from collectors.access import undescribable_topics
from collectors.clients import ClusterUnreachable
from dgm.clients.permissions import TOPIC_DESCRIBE, Denial
from dgm.config.collectors import CollectorSettings
from dgm.util.errors import UserFacingError


class NoTopicsMatch(UserFacingError):
    pass


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int | None


@dataclass(frozen=True)
class ClusterView:
    """One metadata snapshot: the cluster's identity, its brokers, the monitored partitions."""

    cluster_id: str
    brokers: frozenset[int]
    topics: tuple[str, ...]  # every topic, monitored or not
    partitions: tuple[PartitionInfo, ...]  # monitored only, sorted
    topic_ids: Mapping[str, str] = field(default_factory=dict)  # monitored topics' ids
    # Configured topics the cluster refuses to describe: the listing leaves them out.
    denied: tuple[Denial, ...] = ()

    def partition_leaders(self) -> dict[tuple[str, int], int | None]:
        return {(p.topic, p.partition): p.leader for p in self.partitions}


def is_monitored(topic: str, include: Iterable[str], exclude: Iterable[str]) -> bool:
    """Matches an include pattern and no exclude pattern (re.search, like the config says)."""
    return any(re.search(p, topic) for p in include) and not any(
        re.search(p, topic) for p in exclude
    )


def check_matches(view: ClusterView, settings: CollectorSettings) -> None:
    """NoTopicsMatch when the cluster has topics of its own but the patterns pick none.

    A cluster with no topics yet (only internal ones) is not an error: they may come later.
    """
    if view.partitions:
        return
    own = [t for t in view.topics if not t.startswith("__")]
    if not own:
        return
    shown = ", ".join(sorted(own)[:5]) + (", ..." if len(own) > 5 else "")
    raise NoTopicsMatch(
        f"collectors.include_topics {list(settings.include_topics)} and exclude_topics "
        f"{list(settings.exclude_topics)} match none of the cluster's {len(own)} topics "
        f"({shown}); fix the patterns in dgm.toml"
    )


def describe_cluster(
    admin: AdminClient,
    settings: CollectorSettings,
    timeout_s: float,
    expected_topics: tuple[str, ...] = (),
) -> ClusterView:
    """The metadata; `expected_topics` (the pipelines') that it lacks are asked for by name,
    so one the principal may not describe is a Denial rather than silently absent."""
    try:
        # Asked every cycle, also because it refreshes the leader epochs the client's
        # list_offsets sends: without it, a partition whose leader restarted answered
        # FENCED_LEADER_EPOCH to one long-lived client for over 4 minutes.
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as error:
        raise ClusterUnreachable(f"metadata: {error.args[0].str()}") from None
    partitions = []
    for name, topic in metadata.topics.items():
        if topic.error is not None or not is_monitored(
            name, settings.include_topics, settings.exclude_topics
        ):
            continue
        for number, partition in topic.partitions.items():
            leader = partition.leader if partition.leader >= 0 else None
            partitions.append(PartitionInfo(name, number, leader))
    partitions.sort(key=lambda p: (p.topic, p.partition))
    monitored = sorted({p.topic for p in partitions})
    missing = [t for t in expected_topics if t not in metadata.topics]
    denied = tuple(
        Denial(TOPIC_DESCRIBE, t) for t in undescribable_topics(admin, missing, timeout_s)
    )
    return ClusterView(
        cluster_id=str(metadata.cluster_id),
        brokers=frozenset(metadata.brokers),
        topics=tuple(sorted(metadata.topics)),
        partitions=tuple(partitions),
        topic_ids=topic_ids(admin, monitored, timeout_s),
        denied=denied,
    )


def topic_ids(admin: AdminClient, topics: list[str], timeout_s: float) -> dict[str, str]:
    """Kafka's topic id (KIP-516) of each topic that answered; metadata does not carry it.
    A topic that did not answer is left out: its id is checked again next cycle."""
    if not topics:
        return {}
    try:
        futures = admin.describe_topics(TopicCollection(topics), request_timeout=timeout_s)
    except KafkaException:
        return {}
    found = {}
    for name, future in futures.items():
        try:
            found[name] = str(future.result(timeout=timeout_s + 5).topic_id)
        except (KafkaException, TimeoutError):
            continue
    return found
