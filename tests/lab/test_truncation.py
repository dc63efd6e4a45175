"""A partition truncated for real on 3 brokers (lab/truncation.py: an unclean election of an
out-of-sync follower), against the lab's truth: the producers' ledger of acknowledged sends
and two plain reads of the partition, before the kill and after the old leader is back.

dgm collects and analyzes once before the kill (the records are audited) and once after: the
collectors record the high watermark going back, the audit's re-read finds the truncated
records and the inconsistent offsets, and the analysis publishes them."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from collectors.clients import Clients, ClusterUnreachable
from collectors.cycle import Collector
from dgm.config.loader import load_config
from dgm.contracts.published import open_read_only, published_path
from dgm.contracts.samples import SampleStore
from dgm.contracts.vocabulary import Anomaly, LossCause
from dgm.util.waiting import wait_until
from lab.truncation import truncate
from spark_jobs.job import AnalysisJob

BEFORE, LOST, AFTER = 100, 50, 30


def write_config(folder: Path, bootstrap: str, topic: str, sink: str) -> Path:
    config = folder / "dgm.toml"
    config.write_text(
        f'state_dir = "{folder / "state"}"\n'
        f'[cluster]\nbootstrap_servers = "{bootstrap}"\n'
        f'[collectors]\ninclude_topics = ["^{topic}$", "^{sink}$"]\n'
        "[analysis]\ngrace_s = 0\nmin_records = 1\n"
        f'[[pipelines]]\nname = "copier"\nsource_topics = ["{topic}"]\n'
        f'sink_topics = ["{sink}"]\nconsumer_group = "nobody"\n'
        'declared_semantic = "at-least-once"\n'
    )
    return config


@pytest.mark.slow
def test_an_unclean_election_truncates_and_dgm_sees_it(
    kafka3: Any, spark: Any, tmp_path: Path
) -> None:
    cluster = kafka3.require_embedded()
    store = SampleStore(tmp_path / "state")
    running: dict[str, Any] = {}
    # The pipeline's sink, made while every broker runs: nothing ever copies to it.
    sink = kafka3.new_topic("copies")

    def cycled(collector: Collector) -> bool:
        # As the runner does: a cycle that finds the cluster in flux is tried again.
        try:
            return collector.cycle() is not None
        except ClusterUnreachable:
            return False

    # A second collector samples every half second through the outage and the elections, into
    # a store of its own, as `dgm collect` would: what it records must make sense too.
    watching = SampleStore(tmp_path / "watching")
    stop = threading.Event()

    def watch(collector: Collector) -> None:
        while not stop.wait(0.5):
            cycled(collector)

    def observe(topic: str) -> None:
        """A collector cycle, then an analysis run (audit included)."""
        if not running:
            # Bootstrapped from the broker that is never killed.
            bystander = f"127.0.0.1:{cluster.node(3).ports.port}"
            config = load_config(write_config(tmp_path, bystander, topic, sink))
            clients = Clients({"bootstrap.servers": bystander}, request_timeout_s=5)
            running["collector"] = Collector(clients, config.collectors, store, 5)
            running["job"] = AnalysisJob(config, bystander, spark=spark)
            other = Clients({"bootstrap.servers": bystander}, request_timeout_s=5)
            running["watcher"] = Collector(other, config.collectors, watching, 5)
            running["thread"] = threading.Thread(target=watch, args=(running["watcher"],))
            running["thread"].start()
        wait_until(lambda: cycled(running["collector"]), 60, "a collector cycle")
        running["job"].run_once()

    try:
        done = truncate(
            cluster, kafka3.admin(), tmp_path, print, BEFORE, LOST, AFTER,
            on_written=observe, on_truncated=observe,
        )  # fmt: skip

        # A watching cycle that meets a dead leader waits out its requests' timeouts, so on a
        # busy machine it may not have sampled the new leader yet: wait until it has.
        def sampled_new_leader() -> bool:
            last = running["watcher"].offsets.get((done.topic, 0))
            return last is not None and (last.leader_epoch or 0) > 0

        wait_until(sampled_new_leader, 90, "the watching collector's sample of the new leader")
    finally:
        stop.set()
        if running:
            running["thread"].join(30)
            running["watcher"].clients.close()
            running["collector"].clients.close()
            running["job"].close()

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
    # Sampled through the outage: the high watermark went back to where the new leader's log
    # ended, never to a recovering leader's OFFSET_INVALID.
    watched = [e for e in watching.read("events").to_pylist() if e["event"].endswith("_backwards")]
    assert {e["event"] for e in watched} >= {"high_watermark_backwards"}, watched
    assert all(e["after"] >= BEFORE for e in watched), watched

    # The analysis: the truncated records are the ledger's lost writes, the inconsistent
    # offsets the two reads' differences, each lost with the cause truncation.
    with open_read_only(published_path(tmp_path / "state")) as db:
        anomalies = db.execute(
            'SELECT anomaly, "offset", message_id, now_message_id FROM log_anomalies'
        ).fetchall()
        lost = db.execute("SELECT message_id, cause FROM lost").fetchall()
        verdict = db.execute(
            "SELECT truncated_records, inconsistent_offsets, lost, faults_observed FROM verdicts"
        ).fetchone()
        topic = db.execute(
            "SELECT records, truncated_records, inconsistent_offsets FROM cumulative_topics "
            "WHERE topic = ?",
            [done.topic],
        ).fetchone()
    truncated = {i: o for a, o, i, _ in anomalies if a == Anomaly.TRUNCATED_RECORD}
    inconsistent = {o: (i, now) for a, o, i, now in anomalies if a == Anomaly.INCONSISTENT_OFFSET}
    assert truncated == done.truncated
    assert inconsistent == done.inconsistent
    assert sorted(lost) == sorted((i, LossCause.TRUNCATION.value) for i in done.truncated)
    assert verdict is not None and verdict[:3] == (LOST, AFTER, LOST)
    assert topic == (BEFORE + AFTER, LOST, AFTER)  # the records Kafka holds now
    print(f"dgm: {len(truncated)} truncated records, {len(inconsistent)} inconsistent offsets")
