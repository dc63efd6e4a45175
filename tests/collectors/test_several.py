"""Collectors of several clusters in one process: each cluster's rows qualified in one sample
store, read back plain by its own collector; one cluster down never stops the others."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.compute as pc
import pytest

from collectors.cluster_store import ClusterSampleStore
from collectors.runner import CannotCollect
from collectors.several import cluster_collectors, run_each_forever
from dgm.config.collectors import CollectorSettings
from dgm.contracts.samples import SampleStore, latest_rows
from dgm.util.ports import free_ports
from dgm.util.waiting import wait_until
from tests.support.kafka_cluster import KafkaUnderTest

AT = datetime(2026, 1, 1, tzinfo=UTC)


def offsets_row(cluster_id: str, topic: str) -> dict[str, object]:
    return {
        "sampled_at": AT, "cluster_id": cluster_id, "topic": topic, "partition": 0,
        "leader": 1, "log_start_offset": 0, "high_watermark": 5, "lso": 5, "lso_lag": 0,
        "lso_since": AT, "lso_stuck_ms": 0, "topic_id": None,
    }  # fmt: skip


def test_a_named_clusters_rows_are_qualified_on_disk_and_plain_to_its_collector(
    tmp_path: Path,
) -> None:
    west = ClusterSampleStore(tmp_path, "west")
    west.write("offsets", [offsets_row("W-id", "orders")])
    members = {
        "sampled_at": AT, "cluster_id": "W-id", "group_id": "g", "group_state": "Stable",
        "group_type": "classic", "assignor": "range", "coordinator_id": 1, "member_count": 1,
        "member_id": "m", "client_id": "c", "host": "h", "group_instance_id": None,
        "assignment": [{"topic": "orders", "partition": 0}],
    }  # fmt: skip
    west.write("group_members", [members])
    plain = SampleStore(tmp_path)
    on_disk = plain.read("offsets").to_pylist()[0]
    assert (on_disk["cluster_id"], on_disk["topic"]) == ("west/W-id", "west/orders")
    group = plain.read("group_members").to_pylist()[0]
    assert group["group_id"] == "west/g"
    assert group["assignment"] == [{"topic": "west/orders", "partition": 0}]
    # The default cluster's collector writes next: the west collector still finds its own
    # newest rows, one file back, with the names it knows.
    plain.write("offsets", [offsets_row("D-id", "orders")])
    restored = latest_rows(west, "offsets", "W-id", look_back=2)
    assert [(r["cluster_id"], r["topic"]) for r in restored] == [("W-id", "orders")]
    assert latest_rows(west, "offsets", "W-id", look_back=1) == []  # a lone collector's view
    assert latest_rows(west, "group_members", "W-id")[0]["assignment"] == [
        {"topic": "orders", "partition": 0}
    ]


def sampled_topics(state_dir: Path) -> set[str]:
    table = SampleStore(state_dir).read("offsets")
    return set(pc.unique(table["topic"]).to_pylist())


@pytest.mark.integration
def test_every_cluster_is_sampled_and_one_down_stops_none_of_the_others(
    kafka: KafkaUnderTest, second_kafka: KafkaUnderTest, tmp_path: Path
) -> None:
    here, there = kafka.new_topic("here"), second_kafka.new_topic("there")
    nobody = f"127.0.0.1:{free_ports(1)[0]}"  # nothing listens: never reachable
    stop = threading.Event()
    collectors = cluster_collectors(
        {"default": {"bootstrap.servers": kafka.bootstrap_servers},
         "east": {"bootstrap.servers": second_kafka.bootstrap_servers},
         "down": {"bootstrap.servers": nobody}},
        CollectorSettings(interval_s=0.5),
        tmp_path,
        stop,
        request_timeout_s=2.0,
        connect_timeout_s=2.0,
        report=lambda cluster, line: None,
    )  # fmt: skip
    failed: list[BaseException] = []

    def collect() -> None:
        try:
            run_each_forever(collectors.runners, stop)
        except CannotCollect as error:
            failed.append(error)

    thread = threading.Thread(target=collect, daemon=True)
    began = time.monotonic()
    thread.start()
    try:
        wait_until(lambda: {here, f"east/{there}"} <= sampled_topics(tmp_path), 60, "both")
        # Past the down cluster's connect timeout, the others are still sampled.
        wait_until(lambda: time.monotonic() - began > 4.0, 10, "the connect timeout")
        count = len(SampleStore(tmp_path).files("offsets"))
        wait_until(
            lambda: len(SampleStore(tmp_path).files("offsets")) >= count + 4,
            30,
            "samples after the down cluster gave up",
        )
    finally:
        stop.set()
        thread.join(60)
        collectors.close()
    assert not thread.is_alive()
    assert len(failed) == 1 and str(failed[0]).startswith("cluster down: cannot reach Kafka")
    assert not any(topic.startswith("down/") for topic in sampled_topics(tmp_path))
    assert there not in sampled_topics(tmp_path)  # east's topics are only ever qualified
    cluster_ids = set(SampleStore(tmp_path).read("offsets")["cluster_id"].to_pylist())
    assert len(cluster_ids) == 2 and sum(c.startswith("east/") for c in cluster_ids) == 1
