"""`dgm broker start|status|stop` as a user runs them: separate processes, nothing left behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from embedded_kafka import processes
from embedded_kafka.readiness import live_broker_ids
from embedded_kafka.zookeeper import answers
from tests.support.strength import only_at_full_strength

pytestmark = pytest.mark.integration


def dgm(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shell.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_start_status_stop_leaves_no_process(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    started = dgm("broker", "start", "--state-dir", state)
    try:
        assert started.returncode == 0, started.stderr
        bootstrap = started.stdout.strip()
        assert bootstrap.startswith("127.0.0.1:")
        assert live_broker_ids(bootstrap, timeout=10) == {1}  # it answers a metadata request

        status = dgm("broker", "status", "--state-dir", state)
        assert status.returncode == 0 and "1/1 brokers running" in status.stdout

        again = dgm("broker", "start", "--state-dir", state)
        assert again.returncode == 2 and "already runs" in again.stderr
    finally:
        stopped = dgm("broker", "stop", "--state-dir", state)
    assert stopped.returncode == 0, stopped.stderr
    assert processes.find_pids(state) == []
    assert live_broker_ids(bootstrap, timeout=1) == set()

    idempotent = dgm("broker", "stop", "--state-dir", state)
    assert idempotent.returncode == 0 and "no embedded broker is running" in idempotent.stderr
    assert dgm("broker", "status", "--state-dir", state).returncode == 3


def test_restart_keeps_the_data(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient

    from lab.topics import create_topic

    state = str(tmp_path / "state")
    try:
        first = dgm("broker", "start", "--state-dir", state)
        assert first.returncode == 0, first.stderr
        admin = AdminClient({"bootstrap.servers": first.stdout.strip()})
        create_topic(admin, "kept", partitions=2)
        assert dgm("broker", "stop", "--state-dir", state).returncode == 0

        second = dgm("broker", "start", "--state-dir", state)
        assert second.returncode == 0, second.stderr
        admin = AdminClient({"bootstrap.servers": second.stdout.strip()})
        assert "kept" in admin.list_topics(timeout=10).topics
    finally:
        dgm("broker", "stop", "--state-dir", state)
    assert processes.find_pids(state) == []


def test_bad_kafka_home_is_a_clear_error(tmp_path: Path) -> None:
    result = dgm("broker", "start", "--state-dir", str(tmp_path), "--kafka-home", str(tmp_path))
    assert result.returncode == 2
    assert "is not an Apache Kafka distribution" in result.stderr
    assert "Traceback" not in result.stderr


def test_zookeeper_mode_is_refused_by_name_for_kafka_4(tmp_path: Path) -> None:
    result = dgm(
        "broker", "start", "--state-dir", str(tmp_path), "--kafka-version", "4.0",
        "--mode", "zookeeper",
    )  # fmt: skip
    assert result.returncode == 2
    assert "Kafka 4.0.2 has no ZooKeeper mode" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "broker").exists()  # refused before anything started


@only_at_full_strength  # the default tier starts a 3.x ZooKeeper cluster in test_versions.py
def test_three_brokers_in_zookeeper_mode_from_the_shell(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    started = dgm(
        "broker", "start", "--state-dir", state, "--kafka-version", "3.6", "--mode",
        "zookeeper", "--brokers", "3",
    )  # fmt: skip
    try:
        assert started.returncode == 0, started.stderr
        assert "Kafka 3.6.2 (ZooKeeper mode) ready" in started.stderr
        bootstrap = started.stdout.strip()
        assert live_broker_ids(bootstrap, timeout=10) == {1, 2, 3}
        status = dgm("broker", "status", "--state-dir", state)
        assert "3/3 brokers running" in status.stdout
        zookeeper = next(line for line in status.stdout.splitlines() if "ZooKeeper:" in line)
        assert "running" in zookeeper
        port = int(zookeeper.split("127.0.0.1:")[1].split()[0])
        assert answers(port)
    finally:
        stopped = dgm("broker", "stop", "--state-dir", state)
    assert stopped.returncode == 0, stopped.stderr
    assert processes.find_pids(state) == []  # the brokers and ZooKeeper
    assert not answers(port)
