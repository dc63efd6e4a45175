"""`dgm analyze` SIGKILLed mid-audit and mid-publication, then restarted, publishes the same
tables as a run that was never interrupted, from a copy of the same samples."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import duckdb
from confluent_kafka import Consumer, Producer, TopicPartition

from dgm.headers import ID, PRODUCER, SEQ, SRC
from dgm.published import PUBLISHED_FILE, TABLES
from dgm.waiting import wait_until
from tests.published_lab import collecting

PARTITIONS = 2


def _fill(kafka: Any, source: str, sink: str, group: str) -> None:
    """A source of 200 stamped records; a sink holding all of them, 10 twice (reprocessing);
    the group committed up to the end of the source."""
    producer = Producer(kafka.client_config(**{"enable.idempotence": True}))
    session = uuid.uuid4().hex
    for n in range(200):
        partition = n % PARTITIONS
        headers: dict[str, str | bytes | None] = {
            ID: f"m-{n}",
            PRODUCER: session,
            SEQ: str(n // PARTITIONS),
        }
        producer.produce(source, b"v", f"k{n}", partition=partition, headers=headers)
    producer.flush(30)
    for n in range(200):
        partition = n % PARTITIONS
        lineage = f"{source}/{partition}/{n // PARTITIONS}"
        for _ in range(2 if n < 10 else 1):
            producer.produce(sink, b"v", partition=partition, headers={ID: f"m-{n}", SRC: lineage})
    producer.flush(30)
    consumer = Consumer(kafka.client_config(**{"group.id": group}))
    try:
        offsets = [TopicPartition(source, p, 100) for p in range(PARTITIONS)]
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


def _config(directory: Path, bootstrap: str, source: str, sink: str, group: str) -> Path:
    path = directory / "dgm.toml"
    path.write_text(
        f'state_dir = "{directory / "state"}"\n'
        f'[cluster]\nbootstrap_servers = "{bootstrap}"\n'
        "[analysis]\ngrace_s = 0\nmin_records = 10\n"
        f"[collectors]\ninclude_topics = ['^{source}$', '^{sink}$']\n"
        f'[[pipelines]]\nname = "crashy"\nsource_topics = ["{source}"]\n'
        f'sink_topics = ["{sink}"]\nconsumer_group = "{group}"\n'
        'declared_semantic = "at-least-once"\n'
    )
    return path


def _analyze(config: Path) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "shell.cli", "--config", str(config), "analyze", "--once"]
    env = {**os.environ, "DGM_SPARK_MASTER": "local[1]"}
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )


def _kill_when(config: Path, appears: Any, what: str) -> None:
    """Start `dgm analyze --once` and SIGKILL it the moment `appears()` holds."""
    process = _analyze(config)
    try:
        wait_until(lambda: appears() or process.poll() is not None, 300, what, interval=0.01)
        assert process.poll() is None, f"the run ended before {what}: {process.communicate()[0]}"
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(30) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)


def _complete(config: Path) -> None:
    process = _analyze(config)
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output


def _tables(state_dir: Path) -> dict[str, list[tuple[Any, ...]]]:
    with duckdb.connect(str(state_dir / PUBLISHED_FILE), read_only=True) as db:
        return {
            table.name: sorted(db.execute(f'SELECT * FROM "{table.name}"').fetchall(), key=repr)
            for table in TABLES
            if table.name != "runs"  # its run id and times are the run's own
        }


def test_killed_and_restarted_analysis_publishes_what_an_uninterrupted_one_does(
    kafka: Any, tmp_path: Path
) -> None:
    source, sink = (
        kafka.new_topic("crash-src", PARTITIONS),
        kafka.new_topic("crash-sink", PARTITIONS),
    )
    group = f"crash-{uuid.uuid4().hex[:8]}"
    _fill(kafka, source, sink, group)
    killed, calm = tmp_path / "killed", tmp_path / "calm"
    killed.mkdir()
    config = _config(killed, kafka.bootstrap_servers, source, sink, group)
    from dgm.config import load_config

    samples = killed / "state" / "samples"
    with collecting(kafka.bootstrap_servers, load_config(config), interval_s=0.5):
        wait_until(lambda: len(list((samples / "offsets").glob("*.parquet"))) >= 2, 60, "samples")
    shutil.copytree(killed, calm)
    calm_config = _config(calm, kafka.bootstrap_servers, source, sink, group)

    fingerprints = killed / "state" / "fingerprints"
    _kill_when(
        config,
        lambda: (
            fingerprints.is_dir()
            and any(p.name.startswith(".") and p.is_dir() for p in fingerprints.iterdir())
        ),
        "the audit to start writing its batch",
    )
    state = killed / "state"
    _kill_when(
        config,
        lambda: any(p.name.startswith(f".{PUBLISHED_FILE}.") for p in state.iterdir()),
        "the publication to start writing",
    )
    assert not (state / PUBLISHED_FILE).exists(), "nothing may be published by killed runs"
    _complete(config)
    _complete(calm_config)

    restarted, uninterrupted = _tables(state), _tables(calm / "state")
    assert restarted == uninterrupted
    verdicts = restarted["verdicts"]
    assert len(verdicts) == 1 and verdicts[0][2] == "at-least-once"  # 10 duplicates, no loss
    assert len([row for row in restarted["duplicates"] if row[1] == sink]) == 20
    # The range was audited once: one batch of fingerprints, not two.
    batches = [p for p in fingerprints.iterdir() if p.name.startswith("batch-")]
    assert len(batches) == 1, batches
