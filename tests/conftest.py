"""Session-scoped fixtures: real Kafka clusters (or DGM_BOOTSTRAP) and one SparkSession.

Like confluent-kafka-python's integration conftest: an external cluster when one is named,
otherwise dgm's own embedded Apache Kafka on loopback, started once and stopped at the end.
The clusters only some tests ask for (3 brokers, the second cluster, the SASL one) are
stopped as soon as no test left to run asks for them (tests/support/unused_clusters.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import schema_registry as schema_registries
from tests.support import unused_clusters, worker_groups
from tests.support.kafka_cluster import KafkaUnderTest, embedded
from tests.support.postgres import PostgresUnavailable, PostgresUnderTest, external, local_server
from tests.support.session_runs import SessionRuns


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
    yield from unused_clusters.stopped_when_unused(
        "kafka3", embedded(tmp_path_factory.mktemp("kafka-3"), brokers=3)
    )


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
    yield from unused_clusters.stopped_when_unused(
        "second_kafka", embedded(tmp_path_factory.mktemp("kafka-second"), brokers=1)
    )


@pytest.fixture(scope="session")
def kafka_sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A 1-broker cluster with SASL (SCRAM, and OAUTHBEARER from a token endpoint on loopback)
    and ACLs enforced: tests/support/secured_kafka.py. Started only if a test asks for it."""
    if os.environ.get("DGM_BOOTSTRAP"):
        pytest.skip("the SASL cluster is dgm's embedded one; DGM_BOOTSTRAP is set")
    from tests.support.secured_kafka import running

    yield from unused_clusters.stopped_when_unused(
        "kafka_sasl", running(tmp_path_factory.mktemp("kafka-sasl"))
    )


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
def schema_registry(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[schema_registries.RegistryUnderTest]:
    """A real schema registry with a Confluent-compatible API (DGM_SCHEMA_REGISTRY_URL, or
    dgm's embedded Apicurio Registry started here): tests/support/schema_registry.py."""
    named = schema_registries.external()
    if named is not None:
        yield named
        return
    yield from schema_registries.embedded(tmp_path_factory.mktemp("schema-registry"))


@pytest.fixture(scope="session")
def session_runs(request: pytest.FixtureRequest, kafka: KafkaUnderTest) -> SessionRuns:
    """The session runs below that the collected tests use, run side by side the first time
    one is asked for: tests/support/session_runs.py."""
    return SessionRuns(request)


@pytest.fixture(scope="session")
def lab_runs(kafka: KafkaUnderTest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every lab mode run through real faults with the collectors sampling, once for the
    session: tests/support/published_lab.py (the lab's own tests read them without Spark).
    Alone, not among the session runs (tests/support/session_runs.py says why)."""
    from tests.support.published_lab import run_every_mode

    return run_every_mode(kafka, tmp_path_factory.mktemp("published-lab"))


@pytest.fixture(scope="session")
def published_lab(lab_runs: Any, kafka: KafkaUnderTest, spark: Any) -> Any:
    """`lab_runs` analyzed and published by one `dgm analyze` run."""
    from tests.support.published_lab import publish_lab

    return publish_lab(lab_runs, kafka, spark)


@pytest.fixture(scope="session")
def postgres_lab_runs(postgres: PostgresUnderTest, session_runs: SessionRuns) -> Any:
    """The lab's PostgreSQL modes run through real SIGKILLs with the collectors sampling, once
    for the session: the lab's tests of those modes and the tests of their verdicts read them."""
    return session_runs.result("postgres_lab_runs")


@pytest.fixture(scope="session")
def no_offsets_run(session_runs: SessionRuns) -> Any:
    """The lab's processor that commits no offsets, SIGKILLed three times with the collectors
    sampling, once for the session: tests/support/no_offsets_run.py."""
    return session_runs.result("no_offsets_run")


@pytest.fixture(scope="session")
def share_group_runs(session_runs: SessionRuns) -> Any:
    """The share-group relay in both orders, each SIGKILLed twice with the collectors
    sampling, once for the session: tests/support/share_group_run.py."""
    return session_runs.result("share_group_runs")


@pytest.fixture(scope="session")
def console_relay_run(session_runs: SessionRuns) -> Any:
    """Kafka's console consumer and producer as a relay, SIGKILLed twice with the collectors
    sampling, once for the session: tests/support/console_run.py."""
    return session_runs.result("console_relay_run")


# marker -> the fixtures that start (or reach) its server. A test is marked exactly when its
# fixture closure holds one of them, so `-m "not integration and not spark and not postgres"`
# (README, "Tests": the first tier) starts no broker, no JVM and no PostgreSQL.
SERVER_FIXTURES = {
    "integration": frozenset({"kafka", "kafka3", "second_kafka", "kafka_sasl", "private_cluster"}),
    "spark": frozenset({"spark"}),
    "postgres": frozenset({"postgres"}),
    "schema_registry": frozenset({"schema_registry"}),
}


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller, or a run without workers
        worker_groups.name_the_file()


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        worker_groups.remove_the_file()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups, order = [], {}
    for item in items:
        closure = set(getattr(item, "fixturenames", ()))
        servers = [marker for marker, fixtures in SERVER_FIXTURES.items() if closure & fixtures]
        for marker in servers:
            item.add_marker(marker)
        order[item.nodeid] = worker_groups.spark_only_first(servers)
        group = worker_groups.group_of(servers)
        if group is not None:
            groups.append((item.nodeid, group))
    items.sort(key=lambda item: order[item.nodeid])  # stable: the rest keep their order
    if hasattr(config, "workerinput"):
        worker_groups.write_groups(groups)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return worker_groups.ServerGroups(config, log)


def pytest_collection_finish(session: pytest.Session) -> None:
    unused_clusters.plan(session.items)  # the order they run in


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    result = yield  # the test's own fixtures are torn down first
    unused_clusters.after(item)
    return result
