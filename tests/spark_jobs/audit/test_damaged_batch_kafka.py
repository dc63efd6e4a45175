"""A fingerprint batch damaged on disk, on a real broker: the next audit sets it aside, reads
its offsets again from Kafka, and every record is held exactly once (no false duplicate, no
hole)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from dgm.config.loader import load_config
from dgm.contracts.headers import ID
from spark_jobs.audit.store import FingerprintStore
from tests.support.analysis_run import analyze_once


def produce(kafka: Any, topic: str, first: int, count: int) -> None:
    producer = Producer(kafka.client_config())
    for n in range(first, first + count):
        producer.produce(topic, b"v", partition=n % 2, headers={ID: f"m-{n}"})
    assert producer.flush(30) == 0


def test_a_damaged_batch_is_audited_again_from_kafka(
    kafka: Any, spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topic = kafka.new_topic("damaged", partitions=2)
    config = tmp_path / "dgm.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\n[analysis]\ngrace_s = 0\n'
        f"[collectors]\ninclude_topics = ['^{topic}$']\n"
        f'[[pipelines]]\nname = "d"\nsource_topics = ["{topic}"]\nsink_topics = ["{topic}"]\n'
        'consumer_group = "d"\ndeclared_semantic = "at-least-once"\n'
    )
    produce(kafka, topic, 0, 100)
    analyze_once(kafka, spark, config)
    state = load_config(config).state_dir
    (batch,) = FingerprintStore(state).complete_batches()
    part = max(batch.path.glob("*.parquet"), key=lambda p: p.stat().st_size)
    part.write_bytes(part.read_bytes()[:100])  # truncated, as a failing disk leaves it

    produce(kafka, topic, 100, 10)
    with caplog.at_level(logging.WARNING):
        analyze_once(kafka, spark, config)
    assert f"damaged-{batch.path.name}" in caplog.text
    held = FingerprintStore(state).load(spark).collect()

    assert sorted(r.message_id for r in held) == sorted(f"m-{n}" for n in range(110))
    assert len({(r.partition, r.offset) for r in held}) == 110
