"""Kafka's own tool classes run from the same jars as the broker (later issues rely on them)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from embedded_kafka.tools import tool_command


def run_tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        tool_command(name, list(args)), capture_output=True, text=True, timeout=120, check=False
    )


def test_verifiable_producer_then_consumer_perf_test(kafka: Any) -> None:
    topic = kafka.new_topic("tools")
    produced = run_tool(
        "verifiable-producer",
        "--bootstrap-server",
        kafka.bootstrap_servers,
        "--topic",
        topic,
        "--max-messages",
        "200",
        "--acks",
        "-1",
    )
    assert produced.returncode == 0, produced.stderr
    events = [json.loads(line) for line in produced.stdout.splitlines() if line.startswith("{")]
    assert sum(e.get("name") == "producer_send_success" for e in events) == 200

    perf = run_tool(
        "consumer-perf-test",
        "--bootstrap-server",
        kafka.bootstrap_servers,
        "--topic",
        topic,
        "--messages",
        "200",
        "--timeout",
        "30000",
    )
    assert perf.returncode == 0, perf.stderr
    header, row = perf.stdout.strip().splitlines()[-2:]
    columns = dict(zip([c.strip() for c in header.split(",")], row.split(","), strict=False))
    assert int(columns["data.consumed.in.nMsg"]) == 200


def test_transactions_command_lists_a_transactional_producer(kafka: Any) -> None:
    from confluent_kafka import Producer

    topic = kafka.new_topic("tools-tx")
    producer = Producer(kafka.client_config(**{"transactional.id": f"tool-test-{topic}"}))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"x")
    producer.commit_transaction(30)

    listed = run_tool("transactions", "--bootstrap-server", kafka.bootstrap_servers, "list")
    assert listed.returncode == 0, listed.stderr
    assert f"tool-test-{topic}" in listed.stdout
