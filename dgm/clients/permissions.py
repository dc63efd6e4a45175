"""What dgm's principal may need to do on the cluster: the ACL table of docs/configuration.md.

Each permission is an operation on a kind of resource, with the calls that need it. A call
the cluster refuses (TOPIC_, GROUP_, TRANSACTIONAL_ID_ or CLUSTER_AUTHORIZATION_FAILED)
becomes a `Denial`, said one way everywhere (the collectors' events, the dashboard,
`dgm verdicts`, `dgm check`): "cannot see <what>: missing permission <operation> on
<resource>". tests/dgm/clients/test_permissions.py holds the page's table equal to this one.
"""

from __future__ import annotations

from dataclasses import dataclass

# The events (the `events` sample kind) that record a refusal and its end.
AUTHORIZATION_FAILED = "authorization_failed"
AUTHORIZATION_RESTORED = "authorization_restored"


@dataclass(frozen=True)
class Permission:
    operation: str
    resource: str  # topic, group, transactional id, cluster
    # What dgm cannot see without it ("{name}" is the resource's name).
    sees: str
    # The calls that need it, as the page's table says.
    used_for: str
    # Without it dgm still works, with less: `dgm check` warns instead of failing.
    optional: bool = False

    def on(self, name: str) -> str:
        """'Read on topic orders' (the cluster has no name)."""
        return f"{self.operation} on {self.resource}" + (f" {name}" if name else "")

    def acl_flag(self, name: str) -> str:
        """The kafka-acls.sh arguments that name the resource."""
        flags = {
            "topic": f"--topic {name}",
            "group": f"--group {name}",
            "transactional id": f"--transactional-id {name or '*'}",
            "cluster": "--cluster",
        }
        return f"--operation {self.operation} {flags[self.resource]}"


TOPIC_DESCRIBE = Permission(
    "Describe",
    "topic",
    "topic {name}",
    "metadata, ListOffsets (high watermark, LSO, log start), the committed offsets of its "
    "partitions",
)
TOPIC_READ = Permission(
    "Read",
    "topic",
    "the records and producers of topic {name}",
    "the audit's record reads (Spark's Kafka source), its Fetch of transactional topics' batch "
    "headers (kafka-python), DescribeProducers (producer states per partition)",
)
GROUP_DESCRIBE = Permission(
    "Describe",
    "group",
    "group {name}",
    "ListGroups, DescribeGroups, OffsetFetch (committed offsets)",
)
TRANSACTIONAL_ID_DESCRIBE = Permission(
    "Describe",
    "transactional id",
    "transactional id {name}",
    "ListTransactions (lists only the ids it may describe), DescribeTransactions (hanging and "
    "open transactions)",
)
CLUSTER_DESCRIBE_CONFIGS = Permission(
    "DescribeConfigs",
    "cluster",
    "the brokers' transaction.max.timeout.ms",
    "DescribeConfigs of a broker; without it Kafka's default (15 min) is assumed",
    optional=True,
)
PERMISSIONS: tuple[Permission, ...] = (
    TOPIC_DESCRIBE,
    TOPIC_READ,
    GROUP_DESCRIBE,
    TRANSACTIONAL_ID_DESCRIBE,
    CLUSTER_DESCRIBE_CONFIGS,
)


@dataclass(frozen=True)
class Denial:
    """A permission the cluster refused, for one resource."""

    permission: Permission
    name: str = ""  # the topic, group or transactional id; "" for the cluster

    def line(self) -> str:
        """'cannot see topic orders: missing permission Describe on topic orders'."""
        what = self.permission.sees.format(name=self.name)
        return f"cannot see {what}: missing permission {self.permission.on(self.name)}"

    def fix(self, principal: str) -> str:
        return (
            f"grant it: kafka-acls.sh --bootstrap-server <brokers> --add --allow-principal "
            f"User:{principal} {self.permission.acl_flag(self.name)}"
        )
