"""What dgm's collectors sample on one broker version, with what a monitor must see left in
place: a transaction left open (it pins the LSO), a consumer group of the KIP-848 protocol
where the broker has it, a share group where it has them (tests/embedded_kafka/
test_versions.py: the compatibility matrix's sampled column)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient

from dgm.clients.capabilities import CAPABILITY_MISSING
from dgm.config.loader import load_config
from dgm.contracts.samples import SampleStore
from dgm.util.waiting import wait_until
from lab.share_group import start_from_the_beginning
from tests.support.published_lab import collecting, offsets_samples

OPEN = 5  # records of the transaction left open


@dataclass(frozen=True)
class Sampled:
    """The newest samples of the topic's partition 0, and what the collectors said."""

    high_watermark: int
    lso: int
    open_transaction_start: int | None  # the producers sample's first offset of it
    open_transaction_state: str | None  # the transactions sample's state of its id
    group_types: dict[str, str]  # group id -> group_type, of the groups left in place
    gaps: frozenset[str]  # the capability_missing events' lines


@contextmanager
def open_transaction(bootstrap: str, topic: str) -> Iterator[str]:
    """OPEN records in a transaction that stays open for the block: its transactional id."""
    transactional_id = f"open-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(OPEN):
        producer.produce(topic, value=f"open-{i}")
    assert producer.flush(30) == 0
    try:
        yield transactional_id
    finally:
        producer.abort_transaction(60)


@contextmanager
def kip848_member(bootstrap: str, topic: str) -> Iterator[str]:
    """A member of a consumer group on the KIP-848 protocol, assigned the topic: its group."""
    group = f"kip848-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer"}
    )
    consumer.subscribe([topic])
    try:
        wait_until(lambda: consumer.poll(0.2) is not None or consumer.assignment(), 60,
                   "the KIP-848 member's assignment")  # fmt: skip
        yield group
    finally:
        consumer.close()


@contextmanager
def share_member(bootstrap: str, topic: str) -> Iterator[str]:
    """A member of a share group that has acquired the topic's records: its group."""
    group = f"share-{uuid.uuid4().hex[:8]}"
    start_from_the_beginning(AdminClient({"bootstrap.servers": bootstrap}), group)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([topic])
    try:
        wait_until(lambda: len(consumer.poll(0.5)) > 0, 60, "the share member's first records")
        yield group
    finally:
        consumer.close()


def sampled_on(
    bootstrap: str, topic: str, root: Path, kip848: bool, share: bool
) -> tuple[Sampled, str, list[str]]:
    """The collectors' samples with an open transaction (and the groups the broker has) left in
    place: (what they sampled, the open transaction's id, the groups left)."""
    root.mkdir(parents=True, exist_ok=True)
    config_path = root / "dgm.toml"
    config_path.write_text(f'state_dir = "{root / "state"}"\n')
    state_dir = root / "state"
    with ExitStack() as held:
        transactional_id = held.enter_context(open_transaction(bootstrap, topic))
        groups = [held.enter_context(kip848_member(bootstrap, topic))] if kip848 else []
        if share:
            groups.append(held.enter_context(share_member(bootstrap, topic)))
        with collecting(bootstrap, load_config(config_path), interval_s=1.0):
            wait_until(lambda: offsets_samples(state_dir) >= 3, 60, "3 collector cycles")
    return _read(state_dir, topic, transactional_id, groups), transactional_id, groups


def _read(state_dir: Path, topic: str, transactional_id: str, groups: list[str]) -> Sampled:
    store = SampleStore(state_dir)
    offsets = [
        r for r in store.read("offsets").to_pylist() if (r["topic"], r["partition"]) == (topic, 0)
    ]
    newest = max(offsets, key=lambda r: r["sampled_at"])
    producers = [
        r for r in store.read("producers").to_pylist()
        if (r["topic"], r["partition"]) == (topic, 0) and r["txn_start_offset"] is not None
    ]  # fmt: skip
    transactions = [
        r for r in store.read("transactions").to_pylist()
        if r["transactional_id"] == transactional_id
    ]  # fmt: skip
    members = store.read("group_members").to_pylist()
    events = store.read("events").to_pylist()
    return Sampled(
        high_watermark=newest["high_watermark"],
        lso=newest["lso"],
        open_transaction_start=producers[-1]["txn_start_offset"] if producers else None,
        open_transaction_state=transactions[-1]["state"] if transactions else None,
        group_types={r["group_id"]: r["group_type"] for r in members if r["group_id"] in groups},
        gaps=frozenset(e["detail"] for e in events if e["event"] == CAPABILITY_MISSING),
    )
