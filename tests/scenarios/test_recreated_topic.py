"""A source topic deleted and recreated under the same name, on a real broker: dgm tells the
two apart by topic id, audits the new topic from offset 0 (below the old positions), drops the
old one's fingerprints, records the recreation as a fault of the pipeline, and judges only the
new records: nothing lost, nothing doubled."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from dgm.config.loader import load_config
from dgm.contracts.headers import ID
from dgm.contracts.published import PUBLISHED_FILE, open_read_only
from dgm.util.waiting import wait_until
from spark_jobs.audit.store import FingerprintStore
from tests.support.analysis_run import analyze_once, verdict


def fill(kafka: Any, source: str, sink: str, group: str, prefix: str, count: int) -> None:
    """`count` source records with their sink copies; the group commits the source's end."""
    producer = Producer(kafka.client_config())
    for n in range(count):
        producer.produce(source, b"v", headers={ID: f"{prefix}-{n}"})
        producer.produce(sink, b"v", headers={ID: f"{prefix}-{n}"})
    assert producer.flush(30) == 0
    consumer = Consumer(kafka.client_config(**{"group.id": group}))
    try:
        consumer.commit(offsets=[TopicPartition(source, 0, count)], asynchronous=False)
    finally:
        consumer.close()


def recreate(kafka: Any, topic: str) -> None:
    admin = kafka.admin()
    admin.delete_topics([topic])[topic].result(30)

    def created() -> bool:
        try:
            admin.create_topics([NewTopic(topic, 1, -1)])[topic].result(30)
            return True
        except KafkaException:  # still being deleted
            return False

    wait_until(created, 60, f"{topic} to be created again")


def test_a_recreated_source_topic_is_detected_and_audited_from_its_start(
    kafka: Any, spark: Any, tmp_path: Path
) -> None:
    source, sink = kafka.new_topic("recreated-src"), kafka.new_topic("recreated-sink")
    group = f"recreated-{uuid.uuid4().hex[:6]}"
    config = tmp_path / "dgm.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\n[analysis]\ngrace_s = 0\nmin_records = 10\n'
        f"[collectors]\ninclude_topics = ['^{source}$', '^{sink}$']\n"
        f'[[pipelines]]\nname = "re"\nsource_topics = ["{source}"]\n'
        f'sink_topics = ["{sink}"]\nconsumer_group = "{group}"\n'
        'declared_semantic = "exactly-once"\n'
    )
    fill(kafka, source, sink, group, "old", 100)
    analyze_once(kafka, spark, config)
    state = load_config(config).state_dir
    assert FingerprintStore(state).audited_positions()[(source, 0)] == 100

    recreate(kafka, source)
    fill(kafka, source, sink, group, "new", 30)  # offsets 0-29: below the old position 100
    analyze_once(kafka, spark, config)

    held = FingerprintStore(state).load(spark).where(f"topic = '{source}'").collect()
    assert sorted(r.message_id for r in held) == sorted(f"new-{n}" for n in range(30))
    assert FingerprintStore(state).audited_positions()[(source, 0)] == 30
    found = verdict(config, "re")
    # The old copies in the sink have no source any more: neither lost nor duplicated.
    assert (found["records_checked"], found["lost"], found["duplicate_copies"]) == (30, 0, 0)
    with open_read_only(state / PUBLISHED_FILE) as db:
        faults = db.execute(
            "SELECT pipeline, detail FROM faults WHERE event = 'topic_recreated'"
        ).fetchall()
    assert [pipeline for pipeline, _ in faults] == ["re"], faults
    assert source in faults[0][1]
