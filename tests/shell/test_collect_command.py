"""`dgm collect` as a user runs it: a real subprocess, real exit codes, real signals."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka.admin import AdminClient

from dgm.contracts.sample_schemas import SCHEMAS
from dgm.contracts.samples import SampleStore
from dgm.util.ports import free_ports
from dgm.util.waiting import wait_until
from embedded_kafka.cluster import EmbeddedCluster
from lab.topics import create_topic
from tests.support.collect_process import (
    ROOT,
    collect_process,
    dgm_command,
    environment,
    events,
    write_config,
)
from tests.support.kafka_cluster import BROKER_SESSIONS

SECRET = "hunter2-do-not-print"


def run(config: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        dgm_command(config, *args),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=environment(),
        check=False,
    )


def assert_clear_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.count("dgm: error:") == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_once_samples_and_reports_one_line(kafka: Any, tmp_path: Path) -> None:
    topic = kafka.new_topic("coll-cli", partitions=3)
    config = write_config(tmp_path, kafka.bootstrap_servers, "[collectors]\n")
    config.write_text(
        config.read_text().replace(
            "[collectors]\n", f'[collectors]\ninclude_topics = ["^{topic}$"]\n'
        )
    )
    result = run(config, "--once")
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    assert line.startswith("sampled 3 partitions, ") and " groups, " in line, line
    assert "open transactions" in line and line.endswith("s")
    store = SampleStore(tmp_path / "state")
    assert {r["topic"] for r in store.read("offsets").to_pylist()} == {topic}


def test_patterns_matching_nothing_are_a_clear_error(kafka: Any, tmp_path: Path) -> None:
    kafka.new_topic("coll-exists")  # the cluster has topics; the pattern picks none
    config = write_config(
        tmp_path, kafka.bootstrap_servers, '[collectors]\ninclude_topics = ["^no-such-topic$"]'
    )
    assert_clear_error(run(config, "--once"), "['^no-such-topic$']", "match none of the cluster")


def test_malformed_bootstrap_address_is_a_clear_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, "localhost")
    assert_clear_error(run(config, "--once"), "expected host:port", "'localhost'")


def test_address_nobody_answers_on_is_a_clear_error(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    config = write_config(tmp_path, f"127.0.0.1:{port}")
    result = run(config, "--connect-timeout", "3")
    assert_clear_error(result, f"cannot reach Kafka at 127.0.0.1:{port} within 3s")
    assert len(result.stderr.splitlines()) <= 2, result.stderr  # the log line and the error


def test_wrong_sasl_setting_is_a_clear_error_without_the_password(
    kafka: Any, tmp_path: Path
) -> None:
    # The broker's listener is PLAINTEXT: a SASL handshake cannot succeed.
    client = (
        '[cluster.client]\n"security.protocol" = "SASL_PLAINTEXT"\n'
        f'"sasl.mechanism" = "PLAIN"\n"sasl.username" = "alice"\n"sasl.password" = "{SECRET}"\n'
    )
    config = write_config(tmp_path, kafka.bootstrap_servers)
    config.write_text(config.read_text() + client)
    result = run(config)  # fails as soon as the handshake does, not after the timeout
    assert_clear_error(result, "rejected the connection's security settings", "SASL")
    assert SECRET not in result.stderr + result.stdout

    config.write_text(config.read_text().replace('"PLAIN"', '"PLAN"'))  # a typo: no retrying
    assert_clear_error(run(config), "Unsupported SASL mechanism: PLAN")


@pytest.fixture
def private_cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    """The one test-owned broker: stopping the session's shared broker would break others."""
    cluster = EmbeddedCluster(
        tmp_path / "kafka", brokers=1, die_with_parent=True, overrides=dict(BROKER_SESSIONS)
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_collector_survives_a_broker_outage_and_stops_cleanly_on_sigterm(
    private_cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    admin = AdminClient({"bootstrap.servers": private_cluster.bootstrap_servers})
    create_topic(admin, "orders", partitions=4)
    config = write_config(tmp_path, private_cluster.bootstrap_servers)
    store = SampleStore(tmp_path / "state")
    stdout, stderr = tmp_path / "stdout.log", tmp_path / "stderr.log"
    args = ("--interval", "0.5", "--request-timeout", "3")
    with collect_process(config, stderr, *args, stdout=stdout) as collector:
        wait_until(lambda: len(store.files("offsets")) >= 2, 60, "two offsets samples")
        private_cluster.stop_broker(1, kill=True)
        wait_until(lambda: "outage_start" in events(store), 60, "the outage to be recorded")
        during = len(store.files("offsets"))
        assert collector.poll() is None, stderr.read_text()

        private_cluster.start_broker(1)
        wait_until(lambda: "outage_end" in events(store), 120, "the outage to end")
        wait_until(lambda: len(store.files("offsets")) > during, 60, "sampling to resume")
        assert collector.poll() is None, stderr.read_text()

        collector.send_signal(signal.SIGTERM)
        assert collector.wait(timeout=60) == 0, stderr.read_text()

    # Every file is whole and has its kind's schema; no temp file was left behind.
    for kind, schema in SCHEMAS.items():
        folder = store.kind_dir(kind)
        # (Files a compacted one covers wait to be deleted: dgm.contracts.sample_upkeep.)
        listed = sorted(p.name for p in [*store.files(kind), *store.covered(kind)])
        assert sorted(p.name for p in folder.iterdir()) == listed
        for path in store.files(kind):
            assert pq.read_table(path).schema.equals(schema, check_metadata=False), path
    recorded = events(store)
    assert recorded.count("collector_start") == 1
    assert recorded.count("outage_start") == recorded.count("outage_end") == 1
    assert recorded.index("outage_start") < recorded.index("outage_end")
    (outage_end,) = [e for e in store.read("events").to_pylist() if e["event"] == "outage_end"]
    assert outage_end["after"] > 0  # the outage's length in ms
    log = stderr.read_text()
    assert "Traceback" not in log
    assert log.count("stopped answering") == 1, log  # once per outage
    assert log.count("answers again") == 1, log
    assert "%3|" not in log  # librdkafka's per-attempt complaints stay out of the output
    lines = stdout.read_text().splitlines()
    assert lines and all(line.startswith("sampled 4 partitions") for line in lines), lines


def test_collector_started_while_a_cluster_it_sampled_is_down_waits_for_it(
    private_cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    """A restart during an outage (its supervisor restarts it) is not a wrong address."""
    config = write_config(tmp_path, private_cluster.bootstrap_servers)
    assert run(config, "--once").returncode == 0
    store = SampleStore(tmp_path / "state")
    before = len(store.files("offsets"))
    private_cluster.stop_broker(1, kill=True)
    stderr = tmp_path / "stderr.log"
    with collect_process(
        config, stderr, "--interval", "0.5", "--connect-timeout", "2"
    ) as collector:
        wait_until(lambda: "so waiting for it" in stderr.read_text(), 60, "the waiting notice")
        assert collector.poll() is None, stderr.read_text()  # past --connect-timeout, alive
        private_cluster.start_broker(1)
        wait_until(lambda: len(store.files("offsets")) > before, 120, "sampling to resume")
        collector.send_signal(signal.SIGTERM)
        assert collector.wait(timeout=60) == 0, stderr.read_text()
    assert "dgm: error" not in stderr.read_text()
