"""The embedded broker with SASL and ACLs enforced, its users, and the grants of the ACL table.

One broker (session-scoped, started only by the tests that ask for it) authenticates SCRAM
users and OAUTHBEARER tokens from a real token endpoint on loopback (tests/support/oidc_issuer.py).
The admin is a super user; `dgm` (SCRAM) and `dgm-oidc` (an OIDC client) start with no rights:
a test grants what dgm.clients.permissions says dgm needs, or all of it but one.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType

from dgm.clients.permissions import (
    CLUSTER_DESCRIBE_CONFIGS,
    GROUP_DESCRIBE,
    TOPIC_DESCRIBE,
    TOPIC_READ,
    TRANSACTIONAL_ID_DESCRIBE,
    Permission,
)
from embedded_kafka.cluster import EmbeddedCluster
from embedded_kafka.security import Acl, SaslSetup, create_scram_user, grant, revoke, scram_config
from tests.support.oidc_issuer import Issuer, running_issuer

DGM_USER, DGM_PASSWORD = "dgm", "dgm-scram-secret"
OIDC_CLIENT, OIDC_SECRET = "dgm-oidc", "dgm-oidc-secret"
_RESOURCES = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "transactional id": ResourceType.TRANSACTIONAL_ID,
    "cluster": ResourceType.BROKER,  # confluent-kafka's name for the cluster resource
}


def acl(principal: str, permission: Permission, name: str = "") -> Acl:
    """The ACL that gives `principal` one permission of the table on one resource."""
    resource = _RESOURCES[permission.resource]
    return Acl(
        f"User:{principal}",
        resource,
        "kafka-cluster" if resource == ResourceType.BROKER else name,
        getattr(AclOperation, _snake(permission.operation)),
    )


def _snake(operation: str) -> str:
    """Kafka's operation name (DescribeConfigs) as confluent-kafka's enum member."""
    return "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(operation)).upper()


def needed(principal: str, topics: Iterable[str], groups: Iterable[str]) -> list[Acl]:
    """Every permission of dgm.clients.permissions for these topics and groups."""
    return [
        *(acl(principal, p, t) for t in topics for p in (TOPIC_DESCRIBE, TOPIC_READ)),
        *(acl(principal, GROUP_DESCRIBE, g) for g in groups),
        acl(principal, TRANSACTIONAL_ID_DESCRIBE, "*"),
        acl(principal, CLUSTER_DESCRIBE_CONFIGS),
    ]


@dataclass
class SecuredKafka:
    cluster: EmbeddedCluster
    issuer: Issuer
    admin: AdminClient  # the super user, over SASL

    @property
    def bootstrap_servers(self) -> str:
        return self.cluster.sasl_bootstrap_servers

    def scram_client(self) -> dict[str, str]:
        """[cluster.client] of the SCRAM user dgm."""
        return {k: v for k, v in scram_config("", DGM_USER, DGM_PASSWORD).items() if v}

    def oidc_client(self) -> dict[str, str]:
        """[cluster.client] of the OIDC client dgm-oidc."""
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": OIDC_CLIENT,
            "sasl.oauthbearer.client.secret": OIDC_SECRET,
            "sasl.oauthbearer.token.endpoint.url": self.issuer.url,
            "sasl.oauthbearer.scope": "kafka",
        }

    def admin_config(self) -> dict[str, Any]:
        assert self.cluster.sasl is not None
        return self.cluster.sasl.admin_config(self.bootstrap_servers)

    def new_topic(self, prefix: str = "secured", partitions: int = 1) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        for future in self.admin.create_topics([NewTopic(name, partitions, 1)]).values():
            future.result(timeout=30)
        return name

    def grant(self, acls: Iterable[Acl]) -> None:
        acls = list(acls)
        grant(self.admin, acls)
        self._wait_for(acls, present=True)

    def revoke(self, acls: Iterable[Acl]) -> None:
        acls = list(acls)
        revoke(self.admin, acls)
        self._wait_for(acls, present=False)

    def _wait_for(self, acls: list[Acl], present: bool, timeout_s: float = 30.0) -> None:
        """Until the broker's authorizer (which answers DescribeAcls) holds them, or not."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            held = [
                bool(self.admin.describe_acls(a.filter(), request_timeout=10).result(timeout=15))
                for a in acls
            ]
            if all(h == present for h in held):
                return
            time.sleep(0.1)
        raise TimeoutError(f"ACLs not {'granted' if present else 'revoked'} in {timeout_s}s")


def running(folder: Path) -> Iterator[SecuredKafka]:
    with running_issuer(folder) as issuer:
        issuer.clients[OIDC_CLIENT] = OIDC_SECRET
        setup = SaslSetup(admin_password=uuid.uuid4().hex, jwks_file=issuer.jwks_file)
        cluster = EmbeddedCluster(folder, brokers=1, die_with_parent=True, sasl=setup)
        cluster.start(fresh=True)
        try:
            admin = AdminClient(setup.admin_config(cluster.sasl_bootstrap_servers))
            create_scram_user(admin, DGM_USER, DGM_PASSWORD)
            yield SecuredKafka(cluster, issuer, admin)
        finally:
            cluster.stop()


def topic_with_records(kafka_sasl: SecuredKafka, count: int = 3) -> str:
    """A new topic holding `count` records, written by the admin."""
    topic = kafka_sasl.new_topic("check")
    producer = Producer(kafka_sasl.admin_config())
    for i in range(count):
        producer.produce(topic, value=f"v{i}")
    assert producer.flush(30) == 0
    return topic
