"""`dgm check` against a broker with SASL and ACLs enforced: every line ✓ when dgm has every
permission of the ACL table, a ✗ naming the one removed (and exit 1), OIDC through all three
clients, and a setting kafka-python cannot take refused before anything connects; against
Kafka 3.6.2 each capability it lacks named as a `!` and exit 0 (and the collectors record the
same gaps, once), against no broker exit 1."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dgm.clients.capabilities import CAPABILITY_MISSING
from dgm.clients.permissions import TOPIC_READ
from dgm.contracts.samples import SampleStore
from dgm.util.ports import free_ports
from embedded_kafka.cluster import EmbeddedCluster
from embedded_kafka.versions import KafkaRelease
from shell.cli import main
from tests.support.secured_kafka import (
    DGM_USER,
    OIDC_CLIENT,
    OIDC_SECRET,
    SecuredKafka,
    acl,
    needed,
    topic_with_records,
)


def write_config(tmp_path: Path, kafka_sasl: SecuredKafka, client: dict[str, str], topic: str,
                 group: str) -> Path:  # fmt: skip
    settings = "".join(f'"{key}" = "{value}"\n' for key, value in client.items())
    path = tmp_path / "dgm.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\n'
        f'[cluster]\nbootstrap_servers = "{kafka_sasl.bootstrap_servers}"\n'
        f"[cluster.client]\n{settings}"
        f'[[pipelines]]\nname = "p"\nsource_topics = ["{topic}"]\nsink_topics = ["{topic}"]\n'
        f'consumer_group = "{group}"\ndeclared_semantic = "at-least-once"\n'
        # A duration: the offsets-by-timestamp lookup is tried too (it needs no group ACL).
        '[analysis]\nstart = "1h"\n'
    )
    return path


def check(config: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    code = main(["check", "--config", str(config)])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_every_permission_passes_and_the_one_removed_is_named(
    kafka_sasl: SecuredKafka, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group = topic_with_records(kafka_sasl), f"g-{uuid.uuid4().hex[:8]}"
    config = write_config(tmp_path, kafka_sasl, kafka_sasl.scram_client(), topic, group)
    granted = needed(DGM_USER, [topic], [group])
    kafka_sasl.grant(granted)
    try:
        code, lines, err = check(config, capsys)
        assert code == 0, "\n".join(lines) + err
        assert lines and all(line.startswith("✓ ") for line in lines), "\n".join(lines)
        assert any(f"Read on topic {topic}" in line for line in lines)
        assert any(f"Describe on group {group}" in line for line in lines)
        assert any("Spark's Java Kafka client: read 3 records" in line for line in lines)
        assert any(f"offsets by timestamp of topic {topic}" in line for line in lines)

        kafka_sasl.revoke([acl(DGM_USER, TOPIC_READ, topic)])
        code, lines, _ = check(config, capsys)
        assert code == 1
        failed = [line for line in lines if line.startswith("✗ ")]
        assert failed, "\n".join(lines)
        assert all(f"missing permission Read on topic {topic}" in line for line in failed)
        assert f"--allow-principal User:{DGM_USER} --operation Read --topic {topic}" in failed[0]
    finally:
        kafka_sasl.revoke(granted)


def test_oidc_client_credentials_reach_all_three_clients(
    kafka_sasl: SecuredKafka, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group = topic_with_records(kafka_sasl), f"g-{uuid.uuid4().hex[:8]}"
    config = write_config(tmp_path, kafka_sasl, kafka_sasl.oidc_client(), topic, group)
    granted = needed(OIDC_CLIENT, [topic], [group])
    kafka_sasl.grant(granted)
    issued = len(kafka_sasl.issuer.issued)
    try:
        code, lines, err = check(config, capsys)
        shown = "\n".join(lines) + err
        assert code == 0, shown
        assert all(line.startswith("✓ ") for line in lines), shown
        for client in ("confluent-kafka (librdkafka): connected", "kafka-python: connected",
                       "Spark's Java Kafka client: read 3 records"):  # fmt: skip
            assert any(line.startswith(f"✓ {client}") for line in lines), shown
        # Each client fetched its own token with the client credentials.
        assert kafka_sasl.issuer.issued[issued:].count(OIDC_CLIENT) >= 3
        assert OIDC_SECRET not in shown
    finally:
        kafka_sasl.revoke(granted)


def test_a_setting_kafka_python_cannot_take_is_refused_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "dgm.toml"
    config.write_text(
        '[cluster]\nbootstrap_servers = "127.0.0.1:9"\n[cluster.client]\n'
        'security.protocol = "SSL"\nssl.keystore.location = "/etc/kafka/dgm.p12"\n'
        'ssl.keystore.password = "hunter2"\n'
    )
    code = main(["check", "--config", str(config)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{config}: cluster.client.ssl.keystore.location: kafka-python takes PEM files" in err
    assert "hunter2" not in err


@pytest.fixture(scope="module")
def kafka_3_6(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """Kafka 3.6.2 (KRaft), the oldest version dgm supports: this module's own broker."""
    cluster = EmbeddedCluster(
        tmp_path_factory.mktemp("kafka-3.6"), brokers=1, die_with_parent=True,
        release=KafkaRelease("3.6.2"),
    )  # fmt: skip
    cluster.start(fresh=True)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.integration
def test_a_3x_broker_s_missing_capabilities_are_named_and_no_failure(
    kafka_3_6: EmbeddedCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "dgm.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\n'
        f'[cluster]\nbootstrap_servers = "{kafka_3_6.bootstrap_servers}"\n'
    )
    code, lines, err = check(config, capsys)
    shown = "\n".join(lines) + err
    assert code == 0, shown
    assert not [line for line in lines if line.startswith("✗ ")], shown
    assert (
        "✓ capabilities of cluster default (Kafka 3.6 by its brokers' API versions): LSO, "
        "producers, open transactions, transaction states, leader epochs"
    ) in lines, shown
    gaps = [line for line in lines if line.startswith("! cannot see ")]
    assert gaps == [
        "! cannot see consumer groups of the KIP-848 protocol on cluster default: the broker "
        "(3.6) has no ConsumerGroupHeartbeat and no ConsumerGroupDescribe — fix: upgrade the "
        "cluster's brokers to Kafka 4.0 or later",
        "! cannot see share groups on cluster default: the broker (3.6) has no "
        "ShareGroupDescribe and no DescribeShareGroupOffsets — fix: upgrade the cluster's "
        "brokers to Kafka 4.1 or later",
    ], shown
    # The collectors find the same gaps every cycle and record each once since their start.
    for _ in range(2):
        assert main(["collect", "--once", "--config", str(config)]) == 0
    events = SampleStore(tmp_path / "state").read("events").to_pylist()
    recorded = [e["detail"] for e in events if e["event"] == CAPABILITY_MISSING]
    said = [line.removeprefix("! ").split(" — fix: ")[0] for line in gaps]
    starts = [e for e in events if e["event"] == "collector_start"]
    assert len(starts) == 2 and sorted(recorded) == sorted(said * 2), events


def test_a_broker_that_cannot_be_reached_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (port,) = free_ports(1)
    config = tmp_path / "dgm.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\n[cluster]\nbootstrap_servers = "127.0.0.1:{port}"\n'
    )
    code = main(["check", "--config", str(config), "--timeout", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert lines[0].startswith(
        f"✗ confluent-kafka (librdkafka): cannot connect to 127.0.0.1:{port}"
    )
    assert not [line for line in lines if "capabilities" in line or "cannot see" in line]
