"""The audit on a real broker and Spark: committed and aborted records, nothing new, new
records once, a batch killed before its rename, the LSO bound, external sinks, id rules."""

from __future__ import annotations

import dataclasses
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from pyspark.sql import functions as F

from dgm.config.cluster import ClusterConfig
from dgm.config.external_sinks import ExternalSink
from dgm.config.pipelines import MessageIdRule
from dgm.contracts.samples import SampleStore
from dgm.util.waiting import wait_until
from lab.processors.sqlite_sink import SinkRow, SinkStore
from spark_jobs.audit import external as audit_external
from spark_jobs.audit import store as fingerprint_store
from spark_jobs.audit.audit import audit
from spark_jobs.audit.batches import MANIFEST
from spark_jobs.audit.cluster_sources import kafka_options
from spark_jobs.audit.external import ExternalSinkError
from spark_jobs.audit.id_rules import ConflictingIdRules, topic_rules
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.audit.store import FingerprintStore
from tests.support.audited_pipeline import config, pipeline, sample, seen
from tests.support.stamped_writes import (
    plain,
    produce_committed_aborted_and_unidentified,
    wait_for_stable_end,
)
from tests.support.transactional import in_transaction, transactional_producer

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@pytest.fixture
def lines() -> Iterator[list[str]]:
    yield []


def test_committed_aborted_plain_then_nothing_new_then_new_records_once(
    spark: Any, kafka: Any, tmp_path: Path, lines: list[str]
) -> None:
    topic = kafka.new_topic("audit")
    sample(kafka, tmp_path, topic)  # LSO 0: the records' arrivals lie after it
    produce_committed_aborted_and_unidentified(kafka, topic)
    wait_for_stable_end(kafka, topic)
    cfg = config(tmp_path, pipeline(topic))
    sample(kafka, tmp_path, topic)

    first = audit(spark, cfg, kafka.bootstrap_servers, lines.append)
    assert first.ranges == (OffsetRange(topic, 0, 0, 10),)
    assert first.records == {topic: 8}
    assert first.transactional == (topic,)
    assert first.batch is not None and first.batch.parent == FingerprintStore(tmp_path).folder
    assert f"audit: topic {topic}: 8 records in 1 partitions, aborted records marked" in lines
    # Offsets 3 and 7 are control markers.
    assert seen(spark, tmp_path) == [
        (0, "kept-0", True),
        (1, "kept-1", True),
        (2, "kept-2", True),
        (4, "gone-0", False),
        (5, "gone-1", False),
        (6, "gone-2", False),
        (8, None, True),
        (9, None, True),
    ]

    sample(kafka, tmp_path, topic)
    again = audit(spark, cfg, kafka.bootstrap_servers)
    assert (again.ranges, again.records, again.batch) == ((), {}, None)

    plain(kafka, topic, "new-0", "new-1", "new-2")
    sample(kafka, tmp_path, topic)
    third = audit(spark, cfg, kafka.bootstrap_servers)
    assert third.ranges == (OffsetRange(topic, 0, 10, 13),)
    assert third.records == {topic: 3}
    offsets = [offset for offset, _, _ in seen(spark, tmp_path)]
    assert offsets == [0, 1, 2, 4, 5, 6, 8, 9, 10, 11, 12]  # each exactly once
    assert FingerprintStore(tmp_path).audited_positions() == {(topic, 0): 13}
    assert arrivals_between_their_samples(spark, tmp_path, topic) == len(offsets)


def arrivals_between_their_samples(spark: Any, state_dir: Path, topic: str) -> int:
    """Check each stored record of `topic` arrived between the last offsets sample whose LSO
    was at most its offset and the first whose LSO was past it, or has no arrival when no two
    samples hold it; how many have one."""
    offsets = SampleStore(state_dir).read("offsets").to_pylist()
    series = sorted((r["sampled_at"], r["lso"]) for r in offsets if r["topic"] == topic)
    stored = FingerprintStore(state_dir).load(spark).where(F.col("topic") == topic)
    rows = stored.select("offset", F.unix_micros("arrived_at"), "arrival_resolution_us")
    found = 0
    for offset, at_us, width in rows.collect():
        before = [t for t, lso in series if lso <= offset]
        after = [t for t, lso in series if lso > offset]
        if not before or not after:
            assert (at_us, width) == (None, None), offset
            continue
        t0, t1 = ((t - EPOCH) // timedelta(microseconds=1) for t in (before[-1], after[0]))
        assert t0 <= at_us <= t1 and width == t1 - t0, (offset, t0, at_us, t1)
        found += 1
    return found


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs, not even `except Exception`."""


def test_a_batch_killed_before_its_rename_is_audited_again_once(
    spark: Any, kafka: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = kafka.new_topic("audit-kill", partitions=2)
    plain(kafka, topic, *(f"r-{i}" for i in range(6)))
    cfg = config(tmp_path, pipeline(topic))
    sample(kafka, tmp_path, topic)

    def kill(_: Path) -> str:
        raise Killed

    # Data written and manifest fsynced, killed before the rename.
    monkeypatch.setattr(fingerprint_store, "next_name", kill)
    with pytest.raises(Killed):
        audit(spark, cfg, kafka.bootstrap_servers)
    leftovers = [
        p for p in FingerprintStore(tmp_path).folder.iterdir() if p.name.startswith(".tmp-")
    ]
    assert len(leftovers) == 1 and (leftovers[0] / MANIFEST).is_file()
    assert FingerprintStore(tmp_path).audited_positions() == {}
    assert FingerprintStore(tmp_path).load(spark).count() == 0

    monkeypatch.undo()
    result = audit(spark, cfg, kafka.bootstrap_servers)
    assert result.records == {topic: 6}
    assert not leftovers[0].exists()
    assert sorted(str(id) for _, id, _ in seen(spark, tmp_path)) == [f"r-{i}" for i in range(6)]


def test_an_open_transaction_is_audited_only_once_it_ends(
    spark: Any, kafka: Any, tmp_path: Path
) -> None:
    topic = kafka.new_topic("audit-open")
    plain(kafka, topic, "before-0", "before-1")  # 0, 1
    producer = transactional_producer(kafka)
    in_transaction(producer, topic, 3)  # 2, 3, 4: open
    plain(kafka, topic, "during")  # 5, above the LSO
    cfg = config(tmp_path, pipeline(topic))
    sample(kafka, tmp_path, topic)

    first = audit(spark, cfg, kafka.bootstrap_servers)
    assert first.ranges == (OffsetRange(topic, 0, 0, 2),)
    assert [id for _, id, _ in seen(spark, tmp_path)] == ["before-0", "before-1"]

    producer.commit_transaction(30)  # marker at 6
    wait_for_lso(kafka, tmp_path, topic, 7)
    second = audit(spark, cfg, kafka.bootstrap_servers)
    assert second.ranges == (OffsetRange(topic, 0, 2, 7),)
    assert seen(spark, tmp_path)[2:] == [
        (2, None, True),
        (3, None, True),
        (4, None, True),
        (5, "during", True),
    ]


def test_a_range_ending_in_an_abort_marker_is_all_aborted(
    spark: Any, kafka: Any, tmp_path: Path
) -> None:
    """The read_committed view sees nothing at all here; the Spark source must skip to the
    end of the range without taking the invisible offsets for lost data."""
    topic = kafka.new_topic("audit-abort")
    producer = transactional_producer(kafka)
    in_transaction(producer, topic, 3)  # 0, 1, 2
    producer.abort_transaction(30)  # marker at 3
    wait_for_lso(kafka, tmp_path, topic, 4)
    result = audit(spark, config(tmp_path, pipeline(topic)), kafka.bootstrap_servers)
    assert result.ranges == (OffsetRange(topic, 0, 0, 4),) and result.transactional == (topic,)
    assert seen(spark, tmp_path) == [(0, None, False), (1, None, False), (2, None, False)]


def wait_for_lso(kafka: Any, state_dir: Path, topic: str, lso: int) -> None:
    """Sample until the collector sees the LSO at `lso` (the commit marker lands async)."""

    def sampled() -> bool:
        sample(kafka, state_dir, topic)
        store = SampleStore(state_dir)
        return bool(store.read("offsets", store.files("offsets")[-1:])["lso"][0].as_py() == lso)

    wait_until(sampled, 30, f"{topic}'s sampled LSO to reach {lso}", interval=0.5)


def sqlite_sink(path: Path, *ids: str) -> None:
    store = SinkStore(path, "results")
    rows = [SinkRow(i, b"v", "src", 0, n) for n, i in enumerate(ids)]
    store.store(rows, [("src", 0, len(ids))])
    store.close()


def test_external_sqlite_sink_round_trip(spark: Any, tmp_path: Path) -> None:
    db = tmp_path / "sink.db"
    sink = ExternalSink(
        db, "results", "message_id", "sqlite", ("source_topic", "source_partition", "source_offset")
    )
    cfg = config(tmp_path / "state", pipeline(f"none-{uuid.uuid4().hex}", external_sink=sink))
    sqlite_sink(db, "a", "b", "c")
    result = audit(spark, cfg, "127.0.0.1:9")  # no topic sampled: Kafka is never asked
    assert result.records == {"external:p:results": 3} and result.batch is None
    frame = FingerprintStore(tmp_path / "state").load(spark).orderBy("offset")
    got = [
        (
            r.topic,
            r.partition,
            r.offset,
            r.message_id,
            r.lineage,
            r.src_topic,
            r.src_partition,
            r.src_offset,
            r.committed,
        )
        for r in frame.collect()
    ]
    assert got == [
        ("external:p:results", 0, n, i, f"src/0/{n - 1}", "src", 0, n - 1, True)
        for n, i in ((1, "a"), (2, "b"), (3, "c"))
    ]
    assert all(r.timestamp is not None for r in frame.collect())

    sqlite_sink(db, "d")  # the snapshot is replaced, not appended to
    assert audit(spark, cfg, "127.0.0.1:9").records == {"external:p:results": 4}
    assert FingerprintStore(tmp_path / "state").load(spark).count() == 4


def test_a_missing_or_locked_external_sink_names_the_pipeline_and_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "sink.db"
    sink = ExternalSink(db, "results", "message_id", "sqlite")
    cfg = config(tmp_path / "state", pipeline("src", name="orders", external_sink=sink))
    with pytest.raises(ExternalSinkError, match=rf"pipeline 'orders'.*{db}.*does not exist"):
        audit(None, cfg, "127.0.0.1:9")  # type: ignore[arg-type]
    assert not db.exists()  # reading never creates it

    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("CREATE TABLE results (message_id TEXT PRIMARY KEY)")
    writer.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(audit_external, "LOCK_TIMEOUT_S", 0.1)
    try:
        with pytest.raises(ExternalSinkError, match=rf"pipeline 'orders'.*{db}.*locked"):
            audit(None, cfg, "127.0.0.1:9")  # type: ignore[arg-type]
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_two_pipelines_giving_a_topic_different_id_rules_is_an_error() -> None:
    same = config(Path("."), pipeline("t", name="a"), pipeline("t", name="b"))
    assert topic_rules(same) == {"t": MessageIdRule()}
    conflicting = config(
        Path("."),
        pipeline("t", name="a"),
        pipeline("u", name="b", sink_topics=("t",), message_id=MessageIdRule("key", "")),
    )
    with pytest.raises(ConflictingIdRules, match=r"topic 't'.*pipeline 'a'.*pipeline 'b'"):
        topic_rules(conflicting)


def test_the_audit_fetch_wait_is_short_unless_the_cluster_sets_its_own(tmp_path: Path) -> None:
    plain = kafka_options(config(tmp_path, pipeline("t")), "h:1")
    assert plain["kafka.fetch.max.wait.ms"] == "10"
    assert plain["kafka.bootstrap.servers"] == "h:1"
    cluster = ClusterConfig(
        client={"security.protocol": "SSL"}, java_client={"fetch.max.wait.ms": "250"}
    )
    configured = dataclasses.replace(config(tmp_path, pipeline("t")), cluster=cluster)
    options = kafka_options(configured, "h:1")
    assert options["kafka.fetch.max.wait.ms"] == "250"
    assert options["kafka.security.protocol"] == "SSL"


def test_topics_sharing_an_id_rule_are_read_together_and_each_gets_its_own_rule(
    spark: Any, kafka: Any, tmp_path: Path
) -> None:
    by_header = [kafka.new_topic("rule-header"), kafka.new_topic("rule-header")]
    by_key = kafka.new_topic("rule-key")
    producer = Producer(kafka.client_config(acks="all"))
    for topic in (*by_header, by_key):
        for i in range(3):
            producer.produce(topic, key=f"k{i}", value="v", headers=[("dgm-id", f"h{i}")])
    assert producer.flush(30) == 0
    cfg = config(
        tmp_path,
        pipeline(by_header[0], name="a", sink_topics=(by_header[1],)),
        pipeline(by_key, name="b", message_id=MessageIdRule("key", "")),
    )
    sample(kafka, tmp_path, *by_header, by_key)

    result = audit(spark, cfg, kafka.bootstrap_servers)
    assert result.records == {topic: 3 for topic in (*by_header, by_key)}
    ids = (
        FingerprintStore(tmp_path)
        .load(spark)
        .groupBy("topic")
        .agg(F.sort_array(F.collect_list("message_id")).alias("ids"))
    )
    assert {r.topic: r.ids for r in ids.collect()} == {
        by_header[0]: ["h0", "h1", "h2"],
        by_header[1]: ["h0", "h1", "h2"],
        by_key: ["k0", "k1", "k2"],
    }


def test_a_topic_without_transactions_is_read_and_written_in_one_spark_job(
    spark: Any, kafka: Any, tmp_path: Path
) -> None:
    """The batch adopts the files the read wrote and is counted from them on the driver: no
    cache, no counting job, no second write (bench/HISTORY.md, "Audit: throughput against
    the engine's floor"); the only other job sends the LSO's segments to the read."""
    topic = kafka.new_topic("audit-one-job", partitions=3)
    sample(kafka, tmp_path, topic)
    plain(kafka, topic, *(f"r-{i}" for i in range(30)))
    cfg = config(tmp_path, pipeline(topic))
    sample(kafka, tmp_path, topic)
    group = f"audit-{uuid.uuid4().hex}"
    context = spark.sparkContext
    context.setJobGroup(group, "one audit")
    try:
        result = audit(spark, cfg, kafka.bootstrap_servers)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert result.records == {topic: 30} and result.transactional == ()
    # And the broadcast of the LSO's segments the arrivals are set from (arrivals.py).
    assert len(context.statusTracker().getJobIdsForGroup(group)) == 2
    assert sorted(str(id) for _, id, _ in seen(spark, tmp_path)) == sorted(
        f"r-{i}" for i in range(30)
    )
    hidden = [p for p in FingerprintStore(tmp_path).folder.iterdir() if p.name.startswith(".s")]
    assert hidden == []  # the scratch folder is gone once the batch is committed
