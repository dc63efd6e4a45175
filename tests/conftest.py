"""Session-scoped fixtures: real Kafka clusters (or DGM_BOOTSTRAP) and one SparkSession.

Like confluent-kafka-python's integration conftest: an external cluster when one is named,
otherwise dgm's own embedded Apache Kafka on loopback, started once and stopped at the end.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from embedded_kafka.cluster import EmbeddedCluster
from lab.topics import create_topic
from tests.postgres import PostgresUnavailable, PostgresUnderTest, external, local_server


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


def _embedded(tmp: Path, brokers: int) -> Iterator[KafkaUnderTest]:
    cluster = EmbeddedCluster(tmp, brokers=brokers, die_with_parent=True)
    cluster.start(fresh=True)
    try:
        yield KafkaUnderTest(cluster.bootstrap_servers, cluster)
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaUnderTest]:
    external = os.environ.get("DGM_BOOTSTRAP")
    if external:
        yield KafkaUnderTest(external, None)
        return
    yield from _embedded(tmp_path_factory.mktemp("kafka-1"), brokers=1)


@pytest.fixture(scope="session")
def kafka3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaUnderTest]:
    """A 3-broker cluster (RF 3, min ISR 2); started only if a test asks for it."""
    if os.environ.get("DGM_BOOTSTRAP"):
        pytest.skip("the 3-broker cluster is dgm's embedded one; DGM_BOOTSTRAP is set")
    yield from _embedded(tmp_path_factory.mktemp("kafka-3"), brokers=3)


@pytest.fixture(scope="session")
def second_kafka(
    kafka: KafkaUnderTest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaUnderTest]:
    """A second, independent 1-broker cluster (its own state folder, ports and cluster id),
    beside `kafka`: for replication between clusters. Started only if a test asks for it;
    DGM_SECOND_BOOTSTRAP names an external one (with DGM_BOOTSTRAP for the first)."""
    external = os.environ.get("DGM_SECOND_BOOTSTRAP")
    if external:
        yield KafkaUnderTest(external, None)
        return
    if kafka.embedded is None:
        pytest.skip("DGM_BOOTSTRAP names an external cluster: set DGM_SECOND_BOOTSTRAP too")
    yield from _embedded(tmp_path_factory.mktemp("kafka-second"), brokers=1)


@pytest.fixture(scope="session")
def kafka_sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A 1-broker cluster with SASL (SCRAM, and OAUTHBEARER from a token endpoint on loopback)
    and ACLs enforced: tests/secured_kafka.py. Started only if a test asks for it."""
    if os.environ.get("DGM_BOOTSTRAP"):
        pytest.skip("the SASL cluster is dgm's embedded one; DGM_BOOTSTRAP is set")
    from tests.secured_kafka import running

    yield from running(tmp_path_factory.mktemp("kafka-sasl"))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from dgm.config.external_sinks import POSTGRESQL_DRIVER_PACKAGE
    from spark_jobs.session import build_session

    session = build_session(
        master="local[2]",
        app_name="dgm-tests",
        shuffle_partitions=4,
        packages=[POSTGRESQL_DRIVER_PACKAGE],  # the JDBC sink tests read a real PostgreSQL
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresUnderTest]:
    """A real PostgreSQL server (DGM_POSTGRES_DSN, or one started here): tests/postgres.py."""
    named = external()
    if named is not None:
        yield named
        return
    try:
        with local_server() as server:
            yield server
    except PostgresUnavailable as why:
        if os.environ.get("CI"):
            raise  # CI installs it (.ci/run): a missing server there is a broken setup
        pytest.skip(str(why))


@pytest.fixture(scope="session")
def published_lab(
    kafka: KafkaUnderTest, spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> Any:
    """Every lab mode run through real faults, collected and analyzed: see published_lab.py."""
    from tests.published_lab import build_published_lab

    return build_published_lab(kafka, spark, tmp_path_factory.mktemp("published-lab"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A test is an integration test exactly when it uses a broker: the marker follows the fixture.
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & {"kafka", "kafka3", "second_kafka", "kafka_sasl"}:
            item.add_marker(pytest.mark.integration)
        if "spark" in fixtures:
            item.add_marker(pytest.mark.spark)
        if "postgres" in fixtures:
            item.add_marker(pytest.mark.postgres)
