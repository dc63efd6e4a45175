"""Kafka's console consumer piped into its console producer through SIGKILLs (the session's
run, tests/support/console_run.py), against an independent read of its topics: nothing lost,
no header anywhere, the copies counted."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.support.console_run import KILLS, MESSAGES, ConsoleRun
from tests.support.kafka_cluster import KafkaUnderTest
from tests.support.truth import Record, read_records

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_killed_relay_loses_nothing_and_stamps_nothing(
    kafka: KafkaUnderTest, console_relay_run: ConsoleRun
) -> None:
    report = console_relay_run.report
    assert report.caught_up, f"not caught up; see {report.run_dir}"
    assert report.messages["acked"] == MESSAGES
    assert [(k["process"], k["returncode"]) for k in report.kills] == [
        ("console-consumer", -9)
    ] * KILLS
    assert report.kills_while_producing >= 1
    assert len(report.restarts) == KILLS
    # After each kill the producer sent what it had read and exited by itself, before the
    # restart; and once more when the relay was stopped. A kill that tore the last line in the
    # pipe ends it with 1 on that line (lab/console/relay.py), everything before it sent.
    ends = {"drained": 0, "torn line": 1}
    drained = [e for e in report.exits if e["cause"] in ends]
    assert [e["returncode"] for e in drained] == [ends[e["cause"]] for e in drained]
    assert len(drained) == KILLS + 1
    assert len(report.exits) == len(drained)
    for kill, exit_, restart in zip(report.kills, drained, report.restarts, strict=False):
        assert kill["at"] <= exit_["at"] <= restart["at"]

    logged = [line.split() for line in Path(report.relay_log).read_text().splitlines()]
    for kill in report.kills:
        fields = ["kill", "process=console-consumer", f"pid={kill['pid']}", "returncode=-9"]
        assert [kill["at_utc"], *fields] in logged
    restarts = [line[0] for line in logged if line[1] == "restart"]
    assert restarts == [r["at_utc"] for r in report.restarts]
    assert all(line[0].endswith("Z") for line in logged)  # UTC

    source = read_records(kafka.bootstrap_servers, report.source_topic)
    sink = read_records(kafka.bootstrap_servers, report.sink_topic)
    assert len(source) == MESSAGES
    assert [r for r in source + sink if r.headers] == []
    source_ids = {record_id(r) for r in source}
    copies = Counter(record_id(r) for r in sink)
    duplicates = sum(copies.values()) - len(copies)
    told = f"{len(sink)} sink records, {len(copies)} ids, {duplicates} duplicates"
    assert set(copies) == source_ids, f"lost {len(source_ids - set(copies))}; {told}"
    # Each copy is its source record's key and JSON value, nothing else.
    originals = {(r.key, r.value) for r in source}
    assert all((r.key, r.value) in originals for r in sink), told
    assert duplicates >= 0, told
    print(told)


def record_id(record: Record) -> str:
    found: str = json.loads(record.value or b"")["id"]
    return found
