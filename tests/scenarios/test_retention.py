"""Retention on a real broker (docs/design.md, "beyond retention"): a clean exactly-once lab
run whose sink (a) or source (b) lost its oldest records to `delete_records`, as a shorter
retention does, then a dgm started afresh on the cluster; (c) a producer session audited from
its middle (`analysis.start = "latest"` between its two halves). None may count a record as
lost, nor a sink copy of a gone source record as a duplicate."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import functions as F

from dgm.config.loader import load_config
from dgm.contracts.headers import ID, PRODUCER, SEQ
from dgm.contracts.published import PUBLISHED_FILE, open_read_only
from lab.run import LabReport, LabSettings, run_lab
from spark_jobs.audit.store import FingerprintStore
from tests.support.analysis_run import analyze_once, verdict

MESSAGES = 600


def clean_eos_run(kafka: Any, root: Path) -> LabReport:
    """A crash-free exactly-once lab run (its truth: nothing lost, nothing doubled)."""
    config_path = root / "lab.toml"
    config_path.write_text(f'state_dir = "{root / "unused"}"\n')
    report = run_lab(
        LabSettings(
            pipeline=f"ret-{uuid.uuid4().hex[:6]}",
            mode="exactly-once",
            bootstrap_servers=kafka.bootstrap_servers,
            lab_dir=root / "lab",
            messages=MESSAGES,
            rate=300.0,
            config_path=config_path,
            progress=lambda line: None,
        )
    )
    assert report.caught_up and report.config_error is None
    return report


def delete_oldest_half(kafka: Any, topic: str) -> int:
    """Delete each partition's records below the middle of its log; how many offsets went."""
    admin: AdminClient = kafka.admin()
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
    consumer = Consumer(kafka.client_config(**{"group.id": f"probe-{uuid.uuid4().hex}"}))
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        }
    finally:
        consumer.close()
    below = [TopicPartition(topic, p, end // 2) for p, end in ends.items() if end > 1]
    for future in admin.delete_records(below).values():
        future.result(timeout=30)
    return sum(tp.offset for tp in below)


def fresh_dgm(kafka: Any, spark: Any, root: Path, report: LabReport, extra: str = "") -> Path:
    """A dgm with an empty state on the lab's pipeline: collect a few cycles, analyze once."""
    lab_toml = Path(report.config_path or "").read_text()
    state_dir = root / f"state-{uuid.uuid4().hex[:6]}"
    text = re.sub(r'^state_dir = ".*"$', f'state_dir = "{state_dir}"', lab_toml, flags=re.M)
    path = root / f"{state_dir.name}.toml"
    path.write_text(
        text.replace("[[pipelines]]", f"[analysis]\ngrace_s = 0\n{extra}\n[[pipelines]]", 1)
    )
    analyze_once(kafka, spark, path)
    return path


def lost_rows(config_path: Path, pipeline: str) -> list[tuple[Any, ...]]:
    with open_read_only(load_config(config_path).state_dir / PUBLISHED_FILE) as db:
        return db.execute(
            "SELECT cause, missing FROM lost WHERE pipeline = ?", [pipeline]
        ).fetchall()


def test_a_sink_that_lost_its_oldest_records_to_retention_loses_nothing(
    kafka: Any, spark: Any, tmp_path: Path
) -> None:
    report = clean_eos_run(kafka, tmp_path)
    assert report.sink_topic is not None
    deleted = delete_oldest_half(kafka, report.sink_topic)
    assert deleted > MESSAGES // 4
    config = fresh_dgm(kafka, spark, tmp_path, report)
    found = verdict(config, report.pipeline)
    assert found["lost"] == 0, lost_rows(config, report.pipeline)
    assert found["achieved"] in ("exactly-once", "insufficient evidence"), found
    assert found["duplicate_copies"] == 0 and found["aborted_reads"] == 0, found
    # The copies deleted are said, not hidden: their source records are beyond retention.
    assert found["beyond_retention"] > 0, found
    assert found["records_checked"] + found["beyond_retention"] <= report.messages["acked"]


def test_a_source_that_lost_its_oldest_records_leaves_no_loss_and_no_duplicate(
    kafka: Any, spark: Any, tmp_path: Path
) -> None:
    # The lab's producer is one session: the audit meets it in its middle (issue (c) too).
    report = clean_eos_run(kafka, tmp_path)
    assert delete_oldest_half(kafka, report.source_topic) > MESSAGES // 4
    config = fresh_dgm(kafka, spark, tmp_path, report)
    found = verdict(config, report.pipeline)
    assert lost_rows(config, report.pipeline) == []
    assert found["lost"] == 0 and found["duplicate_copies"] == 0, found
    assert found["upstream_duplicates"] == 0 and found["aborted_reads"] == 0, found
    assert found["achieved"] == "exactly-once", found
    assert 0 < found["records_checked"] < report.messages["acked"], found


def test_a_producer_session_audited_from_its_middle_has_no_leading_gap(
    kafka: Any, spark: Any, tmp_path: Path
) -> None:
    source, sink = kafka.new_topic("mid-src", partitions=2), kafka.new_topic("mid-sink")
    group = f"mid-{uuid.uuid4().hex[:6]}"
    producer = Producer(kafka.client_config(**{"enable.idempotence": True}))
    session = uuid.uuid4().hex

    def half(first: int) -> None:
        """100 stamped source records of the one session, their copies, the group's commit."""
        for n in range(first, first + 100):
            stamp: dict[str, str | bytes | None] = {
                ID: f"m-{n}",
                PRODUCER: session,
                SEQ: str(n // 2),
            }
            producer.produce(source, b"v", partition=n % 2, headers=stamp)
            producer.produce(sink, b"v", headers={ID: f"m-{n}"})
        assert producer.flush(30) == 0
        consumer = Consumer(kafka.client_config(**{"group.id": group}))
        try:
            ends = [TopicPartition(source, p, (first + 100) // 2) for p in range(2)]
            consumer.commit(offsets=ends, asynchronous=False)
        finally:
            consumer.close()

    half(0)
    config = tmp_path / "dgm.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\n[analysis]\ngrace_s = 0\nmin_records = 10\n'
        'start = "latest"\n'
        f"[collectors]\ninclude_topics = ['^{source}$', '^{sink}$']\n"
        f'[[pipelines]]\nname = "mid"\nsource_topics = ["{source}"]\n'
        f'sink_topics = ["{sink}"]\nconsumer_group = "{group}"\n'
        'declared_semantic = "exactly-once"\n'
    )
    analyze_once(kafka, spark, config)  # positions at the log ends: the first half is never read
    half(100)  # sequences 50..99 of each partition
    analyze_once(kafka, spark, config)
    found = verdict(config, "mid")
    state = load_config(config).state_dir
    held = (
        FingerprintStore(state)
        .load(spark)
        .groupBy("topic", "partition")
        .agg(F.min("offset"), F.max("offset"), F.count("*"), F.min("timestamp"))
    )
    seen = [tuple(r) for r in held.collect()], FingerprintStore(state).audited_positions()
    assert lost_rows(config, "mid") == [], seen
    assert (found["records_checked"], found["lost"], found["achieved"]) == (
        100,
        0,
        "exactly-once",
    ), (found, seen)
