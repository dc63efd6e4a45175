"""MirrorMaker 2's dedicated-mode configuration (mm2.properties) for one lab run.

Two clusters, aliases `a` (source) and `b` (target), one flow a->b of one topic, one task.
Only the source connector works: no heartbeats, no consumer group checkpointed (groups.exclude
matches every group, so the checkpoint connector, which refuses emit.checkpoints.enabled =
false, runs no task), no group-offset, topic-config or ACL syncing. Connect's worker for the
flow keeps its group and internal topics on `b` under names unique to the run, so runs sharing
the clusters never share a Connect cluster.

Replication policies (the replica's name on `b`):
- "default": Kafka's DefaultReplicationPolicy, `a.<topic>` (what MM2 does unless told);
- "identity": IdentityReplicationPolicy, the same name as on `a`.

Exactly-once (KIP-618, dedicated MM2 since Kafka 3.5; Kafka's docs, Geo-Replication, "Exactly
once"): `<target>.exactly.once.source.support = enabled` (a Connect worker property,
DistributedConfig.EXACTLY_ONCE_SOURCE_SUPPORT_CONFIG, reaching the a->b worker through
MirrorMakerConfig.workerConfig's `<target>.` prefix), `dedicated.mode.enable.internal.rest =
true` with `listeners`, and the source consumer at `<source>.consumer.isolation.level =
read_committed` (without it MirrorSourceConnector.exactlyOnceSupport says UNSUPPORTED).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

SOURCE_ALIAS = "a"
TARGET_ALIAS = "b"
ReplicationPolicy = Literal["default", "identity"]
POLICIES: tuple[str, ...] = get_args(ReplicationPolicy)
POLICY_CLASSES = {
    "default": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
    "identity": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
}


@dataclass(frozen=True)
class MirrorSettings:
    source_bootstrap: str  # cluster a
    target_bootstrap: str  # cluster b
    topic: str  # on a
    run_id: str  # names the worker's group and internal topics on b
    exactly_once: bool = False
    policy: ReplicationPolicy = "default"
    offset_flush_interval_ms: int = 1000  # how often offsets are committed without EOS
    rest_port: int = 0  # the internal REST listener's port (exactly-once only)

    @property
    def replica_topic(self) -> str:
        return self.topic if self.policy == "identity" else f"{SOURCE_ALIAS}.{self.topic}"


def mm2_properties(settings: MirrorSettings) -> dict[str, str]:
    a, b, flow = SOURCE_ALIAS, TARGET_ALIAS, f"{SOURCE_ALIAS}->{TARGET_ALIAS}"
    properties = {
        "clusters": f"{a}, {b}",
        f"{a}.bootstrap.servers": settings.source_bootstrap,
        f"{b}.bootstrap.servers": settings.target_bootstrap,
        f"{flow}.enabled": "true",
        f"{flow}.topics": settings.topic,
        f"{b}->{a}.enabled": "false",
        "replication.policy.class": POLICY_CLASSES[settings.policy],
        "tasks.max": "1",
        # One broker per cluster: every topic MM2 creates has one replica.
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "emit.heartbeats.enabled": "false",
        "groups.exclude": ".*",
        "sync.group.offsets.enabled": "false",
        "refresh.groups.enabled": "false",
        "sync.topic.configs.enabled": "false",
        "sync.topic.acls.enabled": "false",
        f"{b}.group.id": f"{settings.run_id}-mm2",
        f"{b}.offset.storage.topic": f"{settings.run_id}-mm2-offsets",
        f"{b}.config.storage.topic": f"{settings.run_id}-mm2-configs",
        f"{b}.status.storage.topic": f"{settings.run_id}-mm2-status",
        f"{b}.offset.flush.interval.ms": str(settings.offset_flush_interval_ms),
    }
    if settings.exactly_once:
        properties |= {
            f"{b}.exactly.once.source.support": "enabled",
            # A restarted instance's task reads the offsets topic read_committed: a killed
            # instance's open transaction holds it back until the broker aborts it at this
            # timeout (the producer's default is 60 s). Each transaction spans one poll.
            f"{b}.producer.transaction.timeout.ms": "10000",
            f"{a}.consumer.isolation.level": "read_committed",
            "dedicated.mode.enable.internal.rest": "true",
            "listeners": f"http://127.0.0.1:{settings.rest_port}",
        }
    return properties


def render(properties: dict[str, str]) -> str:
    """A Java properties file; values here hold no backslash, newline or leading blank."""
    for key, value in properties.items():
        if any(c in key + value for c in "\\\n\r") or value != value.strip():
            raise ValueError(f"cannot write {key}={value!r} as a plain property")
    return "".join(f"{key} = {value}\n" for key, value in properties.items())
