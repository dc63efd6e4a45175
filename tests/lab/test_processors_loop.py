"""The pure parts every processor shares: transform, lineage stamping, offsets, the protocol."""

from __future__ import annotations

import subprocess
import sys

from confluent_kafka import KafkaError, Message, TopicPartition

from dgm.contracts.headers import ID, SRC, parse_src
from lab.processors.announce import format_partitions, parse_partitions, parse_phase
from lab.processors.loop import advanced, as_offsets, is_fatal, sink_headers, transform
from lab.supervisor import child_env


def test_transform_upper_cases_and_keeps_tombstones() -> None:
    assert transform(b'{"id": "a-1"}') == b'{"ID": "A-1"}'
    assert transform(None) is None


def test_sink_headers_copy_the_id_and_stamp_the_source_position() -> None:
    source = Message(
        topic="orders", partition=2, offset=41, value=b"v",
        headers=[(ID, b"id-7"), ("dgm-seq", b"3"), ("other", None)],
    )  # fmt: skip
    stamped = dict(sink_headers(source))
    assert stamped[ID] == b"id-7"
    assert parse_src(stamped[SRC] or b"") == ("orders", 2, 41)
    assert set(stamped) == {ID, SRC}  # the source's producer/seq are not the sink's


def test_sink_headers_without_an_id_still_carry_lineage() -> None:
    stamped = sink_headers(Message(topic="t", partition=0, offset=0, value=b"v"))
    assert [key for key, _ in stamped] == [SRC]


def test_advanced_names_only_partitions_whose_position_moved() -> None:
    done = as_offsets([TopicPartition("t", 0, 10), TopicPartition("t", 1, 5)])
    now = [TopicPartition("t", 0, 10), TopicPartition("t", 1, 7), TopicPartition("t", 2, 1)]
    assert [(tp.partition, tp.offset) for tp in advanced(now, done)] == [(1, 7), (2, 1)]


def test_protocol_lines_parse_and_reject_anything_else() -> None:
    assert parse_phase("phase produced 12\n") == ("produced", 12)
    assert parse_phase("phase committed 3") == ("committed", 3)
    for line in ("phase flushed 1", "phase produced x", "phase produced", "ready 12", ""):
        assert parse_phase(line) is None
    assert parse_partitions("assigned " + format_partitions([2, 0]), "assigned") == [0, 2]
    assert parse_partitions("assigned -", "assigned") == []
    assert parse_partitions("revoked 1", "assigned") is None
    assert parse_partitions("assigned a,b", "assigned") is None


def run_processor(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lab.processors", *args],
        input=stdin, capture_output=True, text=True, timeout=60, env=child_env(), check=False,
    )  # fmt: skip


def test_bad_settings_exit_2_with_a_clear_message_and_no_secret() -> None:
    settings = (
        '{"bootstrap_servers": "127.0.0.1:1", "source_topic": "s", "group_id": "g",'
        ' "batch_size": "20", "client": {"sasl.password": "hunter2"}}'
    )
    done = run_processor("--mode", "at-least-once", "--settings-json", "-", stdin=settings)
    assert done.returncode == 2
    assert "batch_size: expected int" in done.stderr
    assert "hunter2" not in done.stderr + done.stdout


def test_a_mode_without_its_sink_is_refused() -> None:
    settings = '{"bootstrap_servers": "127.0.0.1:1", "source_topic": "s", "group_id": "g"}'
    done = run_processor("--mode", "exactly-once", "--settings-json", settings)
    assert done.returncode == 2 and "exactly-once needs sink_topic" in done.stderr
    done = run_processor("--mode", "idempotent-sink", "--settings-json", settings)
    assert done.returncode == 2 and "sink_path" in done.stderr


def test_a_fatal_consumer_error_without_the_fatal_flag_ends_the_loop() -> None:
    # What consume() returned after a static member was fenced (seen in a broker restart run).
    assert is_fatal(KafkaError(KafkaError._FATAL, "Static consumer fenced"))
    assert is_fatal(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    assert not is_fatal(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))
    assert not is_fatal(KafkaError(KafkaError.REBALANCE_IN_PROGRESS))
