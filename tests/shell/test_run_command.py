"""`dgm run` against a cluster it did not start (`dgm broker start`, as an external cluster
would be): it collects, analyzes, publishes, serves the dashboard and the exporter, then stops
cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from dgm.util.ports import free_ports
from dgm.util.waiting import wait_until
from lab.topics import create_topic
from shell.stack import dashboard_answers
from tests.support.dgm_processes import clean_env, processes_of, published_verdicts, quick_jvm


def dgm(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shell.cli", *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def external_cluster(tmp_path: Path) -> Iterator[str]:
    broker_dir = tmp_path / "elsewhere"
    started = dgm("broker", "start", "--state-dir", str(broker_dir))
    assert started.returncode == 0, started.stderr
    try:
        yield started.stdout.strip()
    finally:
        stopped = dgm("broker", "stop", "--state-dir", str(broker_dir))
        assert stopped.returncode == 0, stopped.stderr


def fill(bootstrap: str, topics: list[str], count: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    producer = Producer({"bootstrap.servers": bootstrap})
    for topic in topics:
        create_topic(admin, topic, 1)
        for n in range(count):
            producer.produce(topic, value=b"x", headers=[("dgm-id", f"id-{n}".encode())])
    assert producer.flush(30) == 0


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(1800)  # one analysis run alone takes minutes on a busy 2-core machine
def test_dgm_run_collects_analyzes_publishes_and_stops(
    tmp_path: Path, external_cluster: str
) -> None:
    fill(external_cluster, ["orders", "orders-enriched"], 20)
    home = tmp_path / "monitor"
    home.mkdir()
    config = home / "dgm.toml"
    config.write_text(
        'state_dir = "state"\n\n'
        f'[cluster]\nbootstrap_servers = "{external_cluster}"\n\n'
        "[collectors]\ninterval_s = 2\n\n"
        "[analysis]\ninterval_s = 5\ngrace_s = 0\n\n"
        '[[pipelines]]\nname = "orders-enricher"\nsource_topics = ["orders"]\n'
        'sink_topics = ["orders-enriched"]\nconsumer_group = "orders-enricher"\n'
        'declared_semantic = "at-least-once"\n'
    )
    port, exporter_port = free_ports(2)
    url = f"http://127.0.0.1:{port}"
    output = tmp_path / "run.out"
    with output.open("w") as out:
        run = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "shell.cli",
                "run",
                "--config",
                str(config),
                "--port",
                str(port),
                "--exporter-port",
                str(exporter_port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
            env=quick_jvm(clean_env()),  # its analysis's JVM lives for a few short cycles
        )

    def alive() -> bool:
        assert run.poll() is None, f"dgm run exited:\n{output.read_text()[-3000:]}"
        return False

    state_dir = home / "state"
    try:
        wait_until(lambda: alive() or dashboard_answers(url), 240, "the dashboard")
        wait_until(
            lambda: alive() or "orders-enricher" in published_verdicts(state_dir),
            600,
            "a published analysis",
            interval=1,
        )
        with duckdb.connect(str(state_dir / "dgm.duckdb"), read_only=True) as db:
            records = db.execute(
                "SELECT topic, records FROM topic_windows WHERE window_start IS NULL ORDER BY topic"
            ).fetchall()
        assert ("orders", 20) in records and ("orders-enriched", 20) in records, records
        # The exporter service serves the same publication.
        metrics = f"http://127.0.0.1:{exporter_port}/metrics"
        wait_until(lambda: alive() or published_up(metrics), 60, "the exporter's metrics")
        wait_until(lambda: "status: last sample" in output.read_text(), 60, "a status line")
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGTERM)
        returncode = run.wait(120)
    text = output.read_text()
    assert returncode == 0, text[-3000:]
    assert f"dashboard: {url}" in text
    assert text.rstrip().endswith("stopped")
    # Its services (collectors, analysis with its Spark JVM, Streamlit) carry its state dir.
    wait_until(lambda: not processes_of(str(state_dir)), 30, "no process of dgm run left")
    assert (state_dir / "logs" / "collectors.log").exists()


def published_up(url: str) -> bool:
    """The exporter answers and read the publication (dgm_publication_up 1)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return "\ndgm_publication_up 1.0\n" in answer.read().decode()
    except OSError:
        return False


def test_dgm_run_without_a_cluster_is_one_clear_line(tmp_path: Path) -> None:
    (tmp_path / "dgm.toml").write_text(f'state_dir = "{tmp_path / "state"}"\n')
    result = dgm("run", "--config", str(tmp_path / "dgm.toml"), timeout=60)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("dgm: error: no Kafka cluster to talk to")
