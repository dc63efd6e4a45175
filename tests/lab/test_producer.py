"""The stamped producer against the real broker: what the ledger says was acknowledged is
exactly what a consumer finds in the topic."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from dgm.contracts import headers
from dgm.contracts.headers import header_map
from dgm.util.waiting import wait_until
from lab import producer as producer_module
from lab.ledger import read_ledger
from lab.producer import (
    ProducerSettings,
    ProducerSettingsError,
    librdkafka_config,
    partition_for,
    run_producer,
    settings_from_json,
    settings_to_json,
    should_abort,
    validate,
)


def read_topic(kafka: Any, topic: str, isolation: str) -> list[Any]:
    """Every record of `topic` up to its high watermark, read by a plain consumer."""
    consumer = Consumer(
        kafka.client_config(
            **{
                "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                "isolation.level": isolation,
                "enable.auto.commit": False,
            }
        )
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records: list[Any] = []

        def caught_up() -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                records.append(message)
            positions = consumer.position([TopicPartition(topic, p) for p in partitions])
            return all(tp.offset >= ends[tp.partition] for tp in positions)

        # read_committed stops at the LSO: it reaches the end once the last marker is written.
        wait_until(caught_up, 60, f"a {isolation} reader to reach the end of {topic}", interval=0)
        return records
    finally:
        consumer.close()


def settings(kafka: Any, topic: str, tmp_path: Path, **extra: Any) -> ProducerSettings:
    defaults: dict[str, Any] = {"messages": 300, "ledger_path": tmp_path / "ledger.jsonl"}
    return ProducerSettings(kafka.bootstrap_servers, topic, **{**defaults, **extra})


def stamps(record: Any) -> tuple[str, str, int]:
    h = header_map(record.headers())
    return h[headers.ID].decode(), h[headers.PRODUCER].decode(), int(h[headers.SEQ])


# -- pure ---------------------------------------------------------------------------------------


def test_partition_is_a_function_of_the_key() -> None:
    spread = {partition_for(f"key-{i}", 3) for i in range(100)}
    assert spread == {0, 1, 2}
    assert partition_for("key-7", 3) == partition_for("key-7", 3)


def test_every_kth_transaction_aborts() -> None:
    assert [t for t in range(1, 10) if should_abort(t, 3)] == [3, 6, 9]
    assert not any(should_abort(t, 0) for t in range(1, 10))


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"messages": -1}, "messages must be >= 0"),
        ({"rate": 0.0}, "rate must be > 0"),
        ({"transaction_size": 0}, "transaction_size"),
        ({"key_spread": 0}, "key_spread"),
        ({"transactional_id": "t", "enable_idempotence": False}, "is idempotent"),
        ({"abort_every": 2}, "abort_every needs a transactional_id"),
        ({"max_in_flight": 0}, "max_in_flight must be >= 1"),
    ],
)
def test_bad_settings_are_refused_clearly(change: dict[str, Any], complaint: str) -> None:
    good = ProducerSettings("127.0.0.1:1", "t", 10, Path("l"))
    with pytest.raises(ProducerSettingsError, match=complaint):
        validate(replace(good, **change))


def test_settings_json_round_trip_and_errors() -> None:
    original = ProducerSettings(
        "127.0.0.1:1", "t", 10, Path("/x/l.jsonl"), rate=5.0, client={"sasl.password": "s3cret"},
        enable_idempotence=False, max_in_flight=5, stamp_headers=False,
    )  # fmt: skip
    assert settings_from_json(settings_to_json(original)) == original
    assert librdkafka_config(original)["max.in.flight.requests.per.connection"] == 5
    assert "max.in.flight.requests.per.connection" not in librdkafka_config(
        replace(original, max_in_flight=None)
    )  # librdkafka's own default
    assert "s3cret" not in repr(original)
    with pytest.raises(ProducerSettingsError, match=r"unknown producer settings.*'mesages'"):
        settings_from_json('{"mesages": 1}')
    with pytest.raises(ProducerSettingsError, match="not JSON"):
        settings_from_json("{")
    with pytest.raises(ProducerSettingsError, match="incomplete"):
        settings_from_json('{"topic": "t"}')


# -- real broker --------------------------------------------------------------------------------


def test_every_message_is_stamped_and_the_ledger_matches_the_topic(
    kafka: Any, tmp_path: Path
) -> None:
    topic = kafka.new_topic("stamped", partitions=3)
    result = run_producer(settings(kafka, topic, tmp_path, session="s-1"))
    assert (result.sent, result.acked, result.failed, result.session) == (300, 300, 0, "s-1")

    records = read_topic(kafka, topic, "read_uncommitted")
    found = {stamps(r)[0]: (r.partition(), r.offset()) for r in records}
    assert len(records) == len(found) == 300  # dgm-id unique
    assert {stamps(r)[1] for r in records} == {"s-1"}
    by_partition: dict[int, list[int]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r.partition(), r.offset())):
        by_partition[r.partition()].append(stamps(r)[2])
    assert len(by_partition) == 3
    for seqs in by_partition.values():
        assert seqs == list(range(len(seqs)))  # contiguous from 0, in log order
    ledger = read_ledger(tmp_path / "ledger.jsonl")
    assert ledger.acked == found
    assert len(ledger.sent_ids) == 300 and not ledger.failed_ids


def test_without_stamping_no_record_carries_a_header(kafka: Any, tmp_path: Path) -> None:
    topic = kafka.new_topic("bare", partitions=3)
    result = run_producer(settings(kafka, topic, tmp_path, session="b-1", stamp_headers=False))
    assert (result.sent, result.acked, result.failed) == (300, 300, 0)

    records = read_topic(kafka, topic, "read_uncommitted")
    assert len(records) == 300
    assert [r for r in records if r.headers()] == []
    # The id is in the value only; the key is what a stamped run sends; the ledger unchanged.
    values = [json.loads(r.value()) for r in records]
    assert {v["id"] for v in values} == {f"b-1-{n}" for n in range(300)}
    assert all(
        r.key() == f"key-{v['n'] % 100}".encode() for r, v in zip(records, values, strict=True)
    )
    ledger = read_ledger(tmp_path / "ledger.jsonl")
    ids = {json.loads(r.value())["id"]: (r.partition(), r.offset()) for r in records}
    assert ledger.acked == ids and len(ledger.sent_ids) == 300


def test_aborted_ids_are_what_only_read_uncommitted_sees(kafka: Any, tmp_path: Path) -> None:
    topic = kafka.new_topic("txn", partitions=2)
    result = run_producer(
        settings(
            kafka,
            topic,
            tmp_path,
            messages=120,
            transactional_id=f"lab-{uuid.uuid4().hex[:8]}",
            transaction_size=10,
            abort_every=3,
        )
    )
    assert (result.sent, result.acked, result.aborted, result.failed) == (120, 80, 40, 0)

    everything = {stamps(r)[0] for r in read_topic(kafka, topic, "read_uncommitted")}
    committed = read_topic(kafka, topic, "read_committed")
    committed_ids = {stamps(r)[0] for r in committed}
    ledger = read_ledger(tmp_path / "ledger.jsonl")
    assert len(ledger.aborted_ids) == 40
    assert everything - committed_ids == ledger.aborted_ids
    assert ledger.acked == {stamps(r)[0]: (r.partition(), r.offset()) for r in committed}


def test_missing_topic_is_a_clear_error(
    kafka: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(producer_module, "MISSING_TOPIC_GRACE_S", 1.0)  # not the default 10 s
    with pytest.raises(ProducerSettingsError, match="does not exist"):
        run_producer(settings(kafka, f"absent-{uuid.uuid4().hex[:6]}", tmp_path, messages=1))


def test_as_a_process_sigkill_leaves_a_ledger_that_knows_every_written_message(
    kafka: Any, tmp_path: Path
) -> None:
    topic = kafka.new_topic("killed", partitions=2)
    ledger_path = tmp_path / "ledger.jsonl"
    config = settings(kafka, topic, tmp_path, messages=100_000, rate=400.0)
    process = subprocess.Popen(
        [sys.executable, "-m", "lab.producer", "--settings-json", settings_to_json(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(
            lambda: ledger_path.exists() and len(read_ledger(ledger_path).acked) >= 200,
            60,
            "the producer process to have 200 acked messages",
        )
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(10) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    ledger = read_ledger(ledger_path)
    in_topic = {
        stamps(r)[0]: (r.partition(), r.offset())
        for r in read_topic(kafka, topic, "read_uncommitted")
    }
    # "sent" is durable before a message is produced: nothing in the topic is unknown to it.
    assert set(in_topic) <= ledger.sent_ids
    assert all(in_topic[m] == where for m, where in ledger.acked.items())
    assert len(ledger.sent_ids) < 100_000


def test_as_a_process_prints_its_result(kafka: Any, tmp_path: Path) -> None:
    topic = kafka.new_topic("proc")
    config = settings(kafka, topic, tmp_path, messages=20, session="p-1")
    done = subprocess.run(
        [sys.executable, "-m", "lab.producer", "--settings-json", "-"],
        input=settings_to_json(config),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"sent": 20, "acked": 20, "failed": 0, "aborted": 0, "session": "p-1"}
    bad = subprocess.run(
        [sys.executable, "-m", "lab.producer", "--settings-json", '{"topic": 1}'],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "incomplete producer settings" in bad.stderr


@pytest.mark.parametrize("transactional", [False, True], ids=["idempotent", "transactional"])
def test_a_broker_killed_and_restarted_mid_run_loses_nothing(
    kafka3: Any, tmp_path: Path, transactional: bool
) -> None:
    cluster = kafka3.require_embedded()
    topic = kafka3.new_topic("restart", partitions=3)
    ledger_path = tmp_path / "ledger.jsonl"
    config = settings(
        kafka3,
        topic,
        tmp_path,
        messages=1500,
        rate=300.0,
        transactional_id=f"lab-{uuid.uuid4().hex[:8]}" if transactional else None,
    )
    results: list[Any] = []
    producing = threading.Thread(target=lambda: results.append(run_producer(config)))
    producing.start()
    try:
        wait_until(
            lambda: ledger_path.exists() and len(read_ledger(ledger_path).acked) >= 150,
            60,
            "150 acked messages before the crash",
        )
        cluster.stop_broker(2, kill=True)
        acked_at_kill = len(read_ledger(ledger_path).acked)
        wait_until(
            lambda: len(read_ledger(ledger_path).acked) >= acked_at_kill + 150,
            60,
            "150 more acked messages with broker 2 down",
        )
    finally:
        cluster.start_broker(2)
        producing.join(120)
    assert not producing.is_alive() and results
    assert (results[0].sent, results[0].acked, results[0].failed) == (1500, 1500, 0)
    committed = read_topic(kafka3, topic, "read_committed")
    ledger = read_ledger(ledger_path)
    assert ledger.acked == {stamps(r)[0]: (r.partition(), r.offset()) for r in committed}
