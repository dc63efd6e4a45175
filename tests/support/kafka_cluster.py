"""The Kafka cluster a test talks to: an external one (DGM_BOOTSTRAP) or dgm's embedded one,
started on loopback and stopped after (tests/conftest.py's session fixtures hand them out)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from embedded_kafka.cluster import EmbeddedCluster
from embedded_kafka.versions import from_environment
from lab.share_group import BROKER_TIMINGS
from lab.topics import create_topic


@dataclass
class KafkaUnderTest:
    """The cluster a test talks to; `embedded` is None when it is an external one."""

    bootstrap_servers: str
    embedded: EmbeddedCluster | None
    _admin: AdminClient | None = None

    def admin(self) -> AdminClient:
        # One client for the session: a dropped AdminClient never resolves its futures.
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        return self._admin

    def forget_admin(self) -> None:
        """Drop the session's admin client once the cluster is stopped for good: it would go
        on reconnecting (and logging so) until the end of the run."""
        self._admin = None

    def client_config(self, **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap_servers, **extra}

    def new_topic(
        self,
        prefix: str = "t",
        partitions: int = 1,
        replication_factor: int = -1,
        config: Mapping[str, str] | None = None,
    ) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        return create_topic(self.admin(), name, partitions, replication_factor, config)

    def require_embedded(self) -> EmbeddedCluster:
        if self.embedded is None:
            pytest.skip("needs dgm's embedded cluster (DGM_BOOTSTRAP names an external one)")
        return self.embedded


# A broker SIGKILLed and restarted registers again only once the controller has fenced its
# old incarnation, when its session times out (DUPLICATE_BROKER_REGISTRATION until then):
# 9 s by default, 5 s here, with heartbeats every second so a busy machine still keeps live
# brokers' sessions. KRaft only; a ZooKeeper-mode broker ignores both.
BROKER_SESSIONS = {"broker.session.timeout.ms": "5000", "broker.heartbeat.interval.ms": "1000"}


def embedded(tmp: Path, brokers: int) -> Iterator[KafkaUnderTest]:
    # DGM_KAFKA_VERSION and DGM_KAFKA_MODE pick another Kafka (embedded_kafka.versions).
    release = from_environment()
    # Share groups' locks and sessions of seconds, not 30 and 45 s (lab/share_group.py).
    cluster = EmbeddedCluster(
        tmp,
        brokers=brokers,
        die_with_parent=True,
        release=release,
        overrides={**BROKER_TIMINGS, **BROKER_SESSIONS},
    )
    cluster.start(fresh=True)
    try:
        yield KafkaUnderTest(cluster.bootstrap_servers, cluster)
    finally:
        cluster.stop()
