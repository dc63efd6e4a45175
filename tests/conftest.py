"""Session-scoped fixtures: real Kafka clusters (or DGM_BOOTSTRAP) and one SparkSession.

Like confluent-kafka-python's integration conftest: an external cluster when one is named,
otherwise dgm's own embedded Apache Kafka on loopback, started once and stopped at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.kafka_cluster import KafkaUnderTest, embedded
from tests.support.postgres import PostgresUnavailable, PostgresUnderTest, external, local_server


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaUnderTest]:
    external = os.environ.get("DGM_BOOTSTRAP")
    if external:
        yield KafkaUnderTest(external, None)
        return
    yield from embedded(tmp_path_factory.mktemp("kafka-1"), brokers=1)


@pytest.fixture(scope="session")
def kafka3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaUnderTest]:
    """A 3-broker cluster (RF 3, min ISR 2); started only if a test asks for it."""
    if os.environ.get("DGM_BOOTSTRAP"):
        pytest.skip("the 3-broker cluster is dgm's embedded one; DGM_BOOTSTRAP is set")
    yield from embedded(tmp_path_factory.mktemp("kafka-3"), brokers=3)


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
    yield from embedded(tmp_path_factory.mktemp("kafka-second"), brokers=1)


@pytest.fixture(scope="session")
def kafka_sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A 1-broker cluster with SASL (SCRAM, and OAUTHBEARER from a token endpoint on loopback)
    and ACLs enforced: tests/support/secured_kafka.py. Started only if a test asks for it."""
    if os.environ.get("DGM_BOOTSTRAP"):
        pytest.skip("the SASL cluster is dgm's embedded one; DGM_BOOTSTRAP is set")
    from tests.support.secured_kafka import running

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
    """A real PostgreSQL server (DGM_POSTGRES_DSN, or one started here):
    tests/support/postgres.py."""
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
    """Every lab mode run through real faults, collected and analyzed:
    tests/support/published_lab.py."""
    from tests.support.published_lab import build_published_lab

    return build_published_lab(kafka, spark, tmp_path_factory.mktemp("published-lab"))


# marker -> the fixtures that start (or reach) its server. A test is marked exactly when its
# fixture closure holds one of them, so `-m "not integration and not spark and not postgres"`
# (README, "Tests": the first tier) starts no broker, no JVM and no PostgreSQL.
SERVER_FIXTURES = {
    "integration": frozenset({"kafka", "kafka3", "second_kafka", "kafka_sasl", "private_cluster"}),
    "spark": frozenset({"spark"}),
    "postgres": frozenset({"postgres"}),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        closure = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in SERVER_FIXTURES.items():
            if closure & fixtures:
                item.add_marker(marker)
