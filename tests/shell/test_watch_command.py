"""`dgm watch` as a user runs it: a real subprocess on a real broker, SIGKILLed and started
again, then stopped with SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Producer

from dgm.util.waiting import wait_until
from tests.support.kafka_cluster import KafkaUnderTest
from watch.publish import published_seen

ROOT = Path(__file__).resolve().parents[2]
SECRET = "hunter2-do-not-print"


def write_config(tmp_path: Path, bootstrap: str, sink: str) -> Path:
    config = tmp_path / "dgm.toml"
    config.write_text(
        f'state_dir = "state"\n[cluster]\nbootstrap_servers = "{bootstrap}"\n'
        # A secret that reaches every client and must reach no output.
        f'[cluster.client]\n"sasl.password" = "{SECRET}"\n'
        f'[[pipelines]]\nname = "p"\nsource_topics = ["src"]\nsink_topics = ["{sink}"]\n'
        'consumer_group = "g"\ndeclared_semantic = "exactly-once"\n',
        encoding="utf-8",
    )
    return config


def start(config: Path, out: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("DGM_BOOTSTRAP", "DGM_STATE_DIR")}
    env["PYTHONPATH"] = str(ROOT)
    with out.open("ab") as log:
        command = [sys.executable, "-m", "shell.cli", "--config", str(config), "watch"]
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)


def send(producer: Producer, topic: str, ids: list[str]) -> None:
    for found in ids:
        producer.produce(topic, value=b"v", headers=[("dgm-id", found.encode())])
    assert producer.flush(30) == 0


def told(state_dir: Path) -> list[tuple[str, int, int]]:
    return sorted((r["message_id"], r["partition"], r["offset"]) for r in published_seen(state_dir))


def test_dgm_watch_keeps_what_it_told_across_a_sigkill_and_stops_on_sigterm(
    kafka: KafkaUnderTest, tmp_path: Path
) -> None:
    sink = kafka.new_topic("watch-cmd")
    config = write_config(tmp_path, kafka.bootstrap_servers, sink)
    state_dir, out = tmp_path / "state", tmp_path / "watch.out"
    producer = Producer(kafka.client_config())
    watch = start(config, out)
    try:
        send(producer, sink, ["a", "b", "a", "c", "b"])
        wait_until(lambda: told(state_dir) == [("a", 0, 2), ("b", 0, 4)], 90, "two told")
        watch.send_signal(signal.SIGKILL)
        watch.wait(30)
        send(producer, sink, ["c", "a"])  # while no watch runs
        watch = start(config, out)
        # Its lookback reads the records again: the old rows stay, none twice, the new ones come.
        want = [("a", 0, 2), ("a", 0, 6), ("b", 0, 4), ("c", 0, 5)]
        wait_until(lambda: told(state_dir) == want, 90, "the copies written while it was dead")
        watch.send_signal(signal.SIGTERM)
        assert watch.wait(30) == 0
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    printed = out.read_text()
    assert "watch: reading 1 sink topics" in printed
    assert SECRET not in printed
    assert told(state_dir) == want
