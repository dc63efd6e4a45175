"""A partition truncated for real on 3 brokers (lab/truncation.py: an unclean election of an
out-of-sync follower), against the lab's truth: the producers' ledger of acknowledged sends
and two plain reads of the partition, before the kill and after the old leader is back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from collectors.clients import Clients, ClusterUnreachable
from collectors.cycle import Collector
from dgm.config import CollectorSettings
from dgm.samples import SampleStore
from dgm.waiting import wait_until
from lab.truncation import truncate

BEFORE, LOST, AFTER = 100, 50, 30


@pytest.mark.slow
def test_an_unclean_election_truncates_and_dgm_sees_it(kafka3: Any, tmp_path: Path) -> None:
    cluster = kafka3.require_embedded()
    store = SampleStore(tmp_path / "state")
    collectors: list[Collector] = []

    def sample(topic: str) -> None:
        if not collectors:
            settings = CollectorSettings(interval_s=1, include_topics=(f"^{topic}$",))
            clients = Clients(kafka3.client_config(), request_timeout_s=5)
            collectors.append(Collector(clients, settings, store, request_timeout_s=5))
        wait_until(lambda: cycled(collectors[0]), 60, "a collector cycle")

    def cycled(collector: Collector) -> bool:
        # As the runner does: a cycle that finds the cluster in flux is tried again.
        try:
            return collector.cycle() is not None
        except ClusterUnreachable:
            return False

    try:
        done = truncate(
            cluster, kafka3.admin(), tmp_path, print, BEFORE, LOST, AFTER, on_written=sample
        )
        sample(done.topic)
    finally:
        for collector in collectors:
            collector.clients.close()

    # The truth: every acknowledged record of the lost phase is gone, its offsets reused.
    assert (done.high_watermark_before, done.high_watermark_after) == (BEFORE + LOST, BEFORE)
    assert len(done.acked) == BEFORE + LOST + AFTER
    assert sorted(done.truncated.values()) == list(range(BEFORE, BEFORE + LOST))
    assert sorted(done.inconsistent) == list(range(BEFORE, BEFORE + AFTER))
    print(f"truncation made in {done.seconds:.1f}s")

    # The collector saw the high watermark and the LSO go back, in a new leader epoch.
    events = store.read("events").to_pylist()
    backwards = {e["event"]: e for e in events if e["event"].endswith("_backwards")}
    assert set(backwards) == {"high_watermark_backwards", "lso_backwards"}, events
    moved = backwards["high_watermark_backwards"]
    assert (moved["topic"], moved["partition"]) == (done.topic, 0)
    assert (moved["before"], moved["after"]) == (BEFORE + LOST, BEFORE + AFTER)
    assert moved["leader_epoch"] > 0
