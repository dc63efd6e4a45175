from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from collectors.clients import Clients
from collectors.cycle import Collector
from dgm.config.collectors import CollectorSettings
from dgm.contracts.sample_schemas import SCHEMAS
from dgm.contracts.samples import SampleStore
from dgm.util.waiting import wait_until
from tests.support.transactional import in_transaction, send, transactional_producer


def collector(kafka: Any, state_dir: Path, topic: str) -> Collector:
    settings = CollectorSettings(interval_s=1, include_topics=(f"^{topic}$",))
    clients = Clients(kafka.client_config(), request_timeout_s=10)
    return Collector(clients, settings, SampleStore(state_dir), request_timeout_s=10)


def newest(store: SampleStore, kind: str, **match: Any) -> list[dict[str, Any]]:
    latest = store.latest(kind)
    assert latest is not None, f"no {kind} file"
    rows = pq.read_table(latest).to_pylist()
    return [r for r in rows if all(r[k] == v for k, v in match.items())]


def test_a_cycle_writes_every_kind_and_the_open_transaction_shows_in_them(
    kafka: Any, tmp_path: Path
) -> None:
    topic = kafka.new_topic("coll-cycle", partitions=2)
    producer = transactional_producer(kafka)
    producer.begin_transaction()
    send(producer, topic, 5)
    producer.commit_transaction(30)  # partition 0: 0-4, marker 5
    in_transaction(producer, topic, 5)  # open: 6-10

    first = collector(kafka, tmp_path, topic)
    try:
        summary = first.cycle()
        assert summary is not None
        assert (summary.partitions, summary.unavailable, summary.open_transactions) == (2, 0, 1)
        assert "sampled 2 partitions" in summary.line()
        store = first.store
        for kind, schema in SCHEMAS.items():
            (path,) = store.files(kind)
            assert pq.read_schema(path).equals(schema, check_metadata=False), kind
        (offsets,) = newest(store, "offsets", partition=0)
        assert (offsets["lso"], offsets["high_watermark"], offsets["lso_lag"]) == (6, 11, 5)
        assert offsets["cluster_id"] == first.cluster_id and offsets["sampled_at"] is not None
        assert offsets["leader_epoch"] == 0  # the topic's first leader
        (producer_row,) = newest(store, "producers", partition=0)
        assert producer_row["txn_start_offset"] == 6
        assert [e["event"] for e in newest(store, "events")] == ["collector_start"]

        second = first.cycle()
        assert second is not None
        (offsets_later,) = newest(store, "offsets", partition=0)
        assert offsets_later["lso_since"] == offsets["sampled_at"]  # not moved since
        stuck_for = offsets_later["sampled_at"] - offsets["sampled_at"]
        assert offsets_later["lso_stuck_ms"] == stuck_for.total_seconds() * 1000
    finally:
        first.clients.close()

    # A restarted collector keeps counting from the LSO's first sighting, and the commit
    # that finally moves the LSO brings the lag to 0.
    producer.commit_transaction(30)
    restarted = collector(kafka, tmp_path, topic)
    try:

        def lso_moved() -> dict[str, Any] | None:
            restarted.cycle()
            (row,) = newest(restarted.store, "offsets", partition=0)
            return row if row["lso"] == 12 else None

        row = wait_until(lso_moved, 30, "the commit marker to move the LSO")
        assert (row["high_watermark"], row["lso_lag"], row["lso_stuck_ms"]) == (12, 0, 0)
        (untouched,) = newest(restarted.store, "offsets", partition=1)
        assert untouched["lso_since"] == offsets["sampled_at"]  # restored, not restarted
        assert newest(restarted.store, "producers", partition=0)[0]["txn_start_offset"] is None
    finally:
        restarted.clients.close()


def test_a_restarted_collector_sees_a_high_watermark_below_its_last_sample(
    kafka: Any, tmp_path: Path
) -> None:
    """The offsets of the newest sample are the 'before' of the first cycle after a restart:
    a truncation while the collector was down is still an event."""
    topic = kafka.new_topic("coll-back")
    producer = transactional_producer(kafka)
    producer.begin_transaction()
    send(producer, topic, 3)
    producer.commit_transaction(30)  # 0-2, marker 3: high watermark 4
    first = collector(kafka, tmp_path, topic)
    try:
        first.cycle()
    finally:
        first.clients.close()
    (row,) = newest(first.store, "offsets")
    # What the last sample would have said had the log been longer before it was truncated.
    first.store.write_table(
        "offsets",
        pa.Table.from_pylist(
            [{**row, "high_watermark": 9, "lso": 9, "sampled_at": row["sampled_at"]}],
            schema=SCHEMAS["offsets"],
        ),
    )
    restarted = collector(kafka, tmp_path, topic)
    try:
        restarted.cycle()
    finally:
        restarted.clients.close()
    found = [e for e in newest(restarted.store, "events") if e["event"].endswith("_backwards")]
    assert [(e["event"], e["before"], e["after"], e["partition"]) for e in found] == [
        ("high_watermark_backwards", 9, 4, 0),
        ("lso_backwards", 9, 4, 0),
    ]
    assert found[0]["leader_epoch"] == 0 and found[0]["topic"] == topic
