"""Delivery latency on a real broker, against the logs of a relay dgm did not write
(docs/design.md, "Delivery latency").

A producer writes 20 records a second (no dgm header) and notes when each was acknowledged:
readable from then on. A relay copies each record to a sink topic and notes when each copy
was acknowledged; it runs at full speed, then at a quarter of the production rate (it slows,
its backlog and latency grow), then at full speed again (it recovers: its backlog drains,
then a whole window of fast copies follows). The real collectors sample every second;
`dgm analyze` runs at the end of the slow phase and again after the recovery.
What dgm published must agree with the two logs:
- its p50 and p99 over the run within one bucket (19%) plus two sampling intervals of the
  logs' own quantiles;
- an alert on latency_p99 over the newest window fires while the relay is slow and clears
  once it recovered.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from alerts.metrics import read_values
from dgm.config.alerts import AlertRule
from dgm.config.loader import append_pipeline, load_config
from dgm.config.pipelines import MessageIdRule, PipelineConfig
from dgm.contracts.published import open_read_only, published_path
from dgm.contracts.samples import SampleStore
from dgm.util.waiting import wait_until
from spark_jobs.job import AnalysisJob
from tests.support.published_lab import collecting, offsets_samples, wait_for_cycles

pytestmark = [pytest.mark.integration, pytest.mark.slow]

INTERVAL_S = 1.0
PRODUCE_PER_S = 20
# Slow: a record's latency grows by 0.75 s a second of the slow phase (the relay copies a
# quarter of what is produced); with the first analysis (the relay still slow meanwhile) the
# slowest copies take over 10 s, clearly late. Recovered: the backlog (~250 records) drains in
# a few seconds, then a whole window of fast copies (WINDOW_S) is the newest.
FAST_S, SLOW_S = 5.0, 12.0
SLOW_PER_S = PRODUCE_PER_S / 4  # slowed: the backlog grows by 15 records a second
WINDOW_S = 5
SLOW_P99_S = 4.0  # the alert's threshold: reached ~6 s into the slow phase, far above a fast copy
OBJECTIVE_S = 6.0  # the pipeline's latency_objective: records slower are late


@dataclass
class Logs:
    """When each source record and each sink copy was acknowledged (wall clock), by key."""

    sent: dict[str, float] = field(default_factory=dict)
    copied: dict[str, float] = field(default_factory=dict)
    slow_from: float = float("inf")
    slow_until: float = float("inf")

    def latencies(self) -> np.ndarray:
        return np.array([self.copied[k] - self.sent[k] for k in self.copied if k in self.sent])

    def drained(self, before: float) -> bool:
        """Every record acknowledged before `before` copied."""
        return all(k in self.copied for k, at in list(self.sent.items()) if at < before)


def produce(kafka: Any, topic: str, logs: Logs, stop: threading.Event) -> None:
    producer = Producer(kafka.client_config(**{"acks": "all", "linger.ms": 0}))

    def acked(error: Any, message: Any) -> None:
        if error is None:
            logs.sent[message.key().decode()] = time.time()

    started, n = time.monotonic(), 0
    while not stop.is_set():
        producer.produce(topic, key=f"k-{n}".encode(), value=b"x" * 100, on_delivery=acked)
        producer.poll(0)
        n += 1
        time.sleep(max(0.0, started + n / PRODUCE_PER_S - time.monotonic()))
    producer.flush(30)


def relay(kafka: Any, source: str, sink: str, group: str, logs: Logs, stop: Any) -> None:
    consumer = Consumer(
        kafka.client_config(
            **{"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        )
    )
    producer = Producer(kafka.client_config(**{"acks": "all", "linger.ms": 0}))

    def acked(error: Any, message: Any) -> None:
        if error is None:
            logs.copied[message.key().decode()] = time.time()

    consumer.assign([TopicPartition(source, 0, 0)])
    try:
        while not stop.is_set():
            batch = [m for m in consumer.consume(10, 0.1) if not m.error()]
            for message in batch:
                producer.produce(sink, key=message.key(), value=message.value(), on_delivery=acked)
            if batch:
                producer.flush(10)
                position = int(batch[-1].offset() or 0) + 1
                consumer.commit(offsets=[TopicPartition(source, 0, position)], asynchronous=False)
                if logs.slow_from <= time.time() < logs.slow_until:
                    time.sleep(len(batch) / SLOW_PER_S)
    finally:
        producer.flush(10)
        consumer.close()


def p99_alert(state_dir: Path, pipeline: str) -> float | None:
    """The newest window's p99 the rule reads, when it is above the threshold (it fires)."""
    rule = AlertRule(name="slow", metric="latency_p99", threshold=SLOW_P99_S, window="latest")
    values = read_values(state_dir, [rule], datetime.now(UTC))["slow"]
    assert isinstance(values, dict), values
    return values.get(pipeline)


def test_delivery_latency_follows_the_relay_and_its_alert_fires_and_clears(
    kafka: Any, spark: Any, tmp_path: Path
) -> None:
    source, sink = kafka.new_topic("latency-src"), kafka.new_topic("latency-sink")
    group = f"relay-{uuid.uuid4().hex[:8]}"
    config_path = tmp_path / "dgm.toml"
    config_path.write_text(
        f'state_dir = "{tmp_path / "state"}"\n\n[analysis]\ngrace_s = 0\n'
        f"window_s = {WINDOW_S}\nmin_records = 1\n\n[collectors]\ninterval_s = {INTERVAL_S}\n"
    )
    append_pipeline(
        config_path,
        PipelineConfig(
            name="relay",
            source_topics=(source,),
            sink_topics=(sink,),
            consumer_group=group,
            declared_semantic="at-least-once",
            message_id=MessageIdRule("key", ""),
            latency_objective=f"{OBJECTIVE_S:g}s",
        ),
    )
    config = load_config(config_path)
    logs, stop, producing = Logs(), threading.Event(), threading.Event()
    threads = [
        threading.Thread(target=produce, args=(kafka, source, logs, producing), daemon=True),
        threading.Thread(target=relay, args=(kafka, source, sink, group, logs, stop), daemon=True),
    ]
    job = AnalysisJob(config, kafka.bootstrap_servers, master="local[2]", spark=spark)
    job.progress = lambda line: None
    state = config.state_dir
    with collecting(kafka.bootstrap_servers, config, INTERVAL_S):
        wait_for_cycles(state, 2)  # sampled before the first record
        logs.slow_from = time.time() + FAST_S
        for thread in threads:
            thread.start()
        wait_until(lambda: time.time() > logs.slow_from + SLOW_S, 90, "the slow phase")
        job.run_once()  # the relay is still slow meanwhile
        slow = p99_alert(state, "relay")
        logs.slow_until = time.time()
        # Recovered: the backlog drained (the relay a sampling interval behind at most), then
        # a whole window of fast copies, so the newest window holds nothing of the backlog.
        wait_until(lambda: logs.drained(time.time() - INTERVAL_S), 90, "the backlog to drain")
        drained_at = time.time()
        wait_until(
            lambda: time.time() > drained_at + WINDOW_S + INTERVAL_S, 30, "a window after it"
        )
        producing.set()
        wait_until(lambda: set(logs.copied) >= set(logs.sent), 60, "every record copied")
        wait_for_cycles(state, offsets_samples(state) + 2)  # the last copies sampled
        job.run_once()
        recovered = p99_alert(state, "relay")
    stop.set()
    for thread in threads:
        thread.join(30)
    print(f"newest window's p99: {slow} s while slow, {recovered} s once recovered")
    assert slow is not None and slow > SLOW_P99_S
    assert recovered is not None and recovered < SLOW_P99_S

    with open_read_only(published_path(state)) as db:
        p50, p99, measured = db.execute(
            "SELECT latency_p50_s, latency_p99_s, latency_measured FROM verdicts"
        ).fetchone() or (None, None, 0)
    truth = logs.latencies()
    # Two arrivals' resolutions and a cycle's own time: a resolution is the gap between two
    # offsets samples, INTERVAL_S on a quiet machine and longer when the cycles are slowed.
    slack = 2 * max(INTERVAL_S, widest_sampling_gap(state)) + 0.5
    for q, found in ((0.5, p50), (0.99, p99)):
        exact = float(np.quantile(truth, q, method="inverted_cdf"))
        print(f"p{q * 100:g}: dgm {found:.2f} s, the logs {exact:.2f} s")
        assert exact - slack <= found <= exact * 2**0.25 + slack, (q, found, exact)
    assert measured >= 0.9 * len(truth)

    # Late records: every record the logs say took clearly longer than the objective is
    # listed, none that clearly did not; a record within the arrivals' resolution of the
    # objective may fall either way.
    with open_read_only(published_path(state)) as db:
        listed = dict(db.execute("SELECT message_id, delay_s FROM late_records").fetchall())
        (counted,) = db.execute("SELECT late_records FROM verdicts").fetchone() or (None,)
    took = {k: logs.copied[k] - logs.sent[k] for k in logs.copied if k in logs.sent}
    surely = {k for k, s in took.items() if s > OBJECTIVE_S + slack}
    maybe = {k for k, s in took.items() if s > OBJECTIVE_S - slack}
    print(f"late: dgm {len(listed)}, the logs {len(surely)} surely and {len(maybe)} at most")
    assert surely and surely <= set(listed) <= maybe
    assert counted == len(listed)
    assert all(abs(delay - took[k]) <= slack for k, delay in listed.items())


def widest_sampling_gap(state_dir: Path) -> float:
    """The longest time between two consecutive offsets samples, in seconds."""
    times = sorted(set(SampleStore(state_dir).read("offsets")["sampled_at"].to_pylist()))
    return max(((b - a).total_seconds() for a, b in itertools.pairwise(times)), default=0.0)
