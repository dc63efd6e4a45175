"""Lag in seconds and the catch-up estimate on a real broker, against the relay's own log.

A producer writes 20 records a second (no dgm header) and notes when each record was
acknowledged: readable from then on. A relay (a consumer group copying each record to a sink
topic, committing as it goes) commits once, is held back while lag builds, then let go at 40
records a second and notes every commit. The real collector loop samples every second; the
real analysis publishes group_lag and group_status mid-catch-up. What dgm published must agree
with those two logs, which dgm never reads (docs/design.md, "Lag in seconds"):
- every sample's lag in seconds within its resolution (one sampling interval) of the truth;
- the catch-up estimate within one sampling interval, or a quarter of the time left, of when
  the relay's log says it caught up;
- an alert rule on lag_seconds fires for the relay's group.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from alerts.metrics import read_values
from dgm.config.alerts import AlertRule
from dgm.config.analysis import AnalysisSettings
from dgm.config.collectors import CollectorSettings
from dgm.config.document import DgmConfig
from dgm.contracts.published import open_read_only, published_path
from dgm.util.waiting import wait_until
from spark_jobs.analysis_input import Fingerprints
from spark_jobs.analyze.analysis import analyze
from spark_jobs.analyze.publish import publish
from spark_jobs.analyze.samples import read_samples
from spark_jobs.schemas import FINGERPRINT
from tests.support.published_lab import collecting

INTERVAL_S = 1.0  # collector sampling interval
PRODUCE_PER_S = 20
RELAY_PER_S = 40
RELAY_BATCH = 4  # records a commit: the committed offsets the samples see move in small steps
PRODUCE_S = 60.0
# Held back: the lag builds to ~12 s, then drains at 1 s a second (40 copied a second against
# 20 produced), so the analysis at 6 s into the catch-up predicts 6 s more.
HELD_BACK_S = 12.0
WINDOW = 5  # group_status_window: samples the pace is judged over


@dataclass
class Truth:
    """What the producer and the relay logged, in wall-clock seconds."""

    acked_at: dict[int, float] = field(default_factory=dict)  # offset -> acknowledged
    commits: list[tuple[float, int]] = field(default_factory=list)  # (when, committed offset)
    released_at: float = 0.0

    def caught_up_at(self) -> float | None:
        """The first commit after the release past every record acknowledged by then."""
        for at, committed in self.commits:
            acked = [o for o, t in list(self.acked_at.items()) if t <= at]
            if at > self.released_at and acked and committed >= max(acked) + 1:
                return at
        return None

    def lag_s(self, at: float, committed: int) -> float:
        """The true lag in seconds at `at`: the age of the record at `committed`."""
        return at - self.acked_at[committed]


def produce(kafka: Any, topic: str, truth: Truth, stop: Any) -> None:
    """PRODUCE_PER_S records a second, for PRODUCE_S at most: the test stops it once the
    relay has caught up (nothing after that is judged)."""
    producer = Producer(kafka.client_config(**{"acks": "all", "linger.ms": 0}))

    def acked(error: Any, message: Any) -> None:
        if error is None:
            truth.acked_at[message.offset()] = time.time()

    started = time.monotonic()
    for n in range(int(PRODUCE_S * PRODUCE_PER_S)):
        if stop.is_set():
            break
        producer.produce(topic, key=str(n).encode(), value=b"x" * 100, on_delivery=acked)
        producer.poll(0)
        time.sleep(max(0.0, started + (n + 1) / PRODUCE_PER_S - time.monotonic()))
    producer.flush(30)


def relay(kafka: Any, source: str, sink: str, group: str, truth: Truth, stop: Any) -> None:
    """Copy source to sink, committing after each small batch; held back after its first
    commit, then paced to RELAY_PER_S (a steady pace whatever a batch costs: the catch-up is
    predicted from the pace over a few samples)."""
    consumer = Consumer(
        kafka.client_config(
            **{"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        )
    )
    producer = Producer(kafka.client_config(acks="all"))
    consumer.assign([TopicPartition(source, 0, 0)])
    position, copied = 0, 0
    paced_from: float | None = None
    try:
        while not stop.is_set():
            if truth.commits and time.time() < truth.released_at:
                time.sleep(0.05)
                continue
            batch = [m for m in consumer.consume(RELAY_BATCH, 0.2) if not m.error()]
            for message in batch:
                producer.produce(sink, key=message.key(), value=message.value())
            if batch:
                producer.flush(10)
                position = int(batch[-1].offset() or 0) + 1
                consumer.commit(offsets=[TopicPartition(source, 0, position)], asynchronous=False)
                truth.commits.append((time.time(), position))
                if len(truth.commits) == 1:
                    truth.released_at = time.time() + HELD_BACK_S
                    continue
                if paced_from is None:
                    paced_from = time.monotonic()
                copied += len(batch)
                time.sleep(max(0.0, paced_from + copied / RELAY_PER_S - time.monotonic()))
    finally:
        consumer.close()


def test_lag_in_seconds_and_the_catch_up_agree_with_the_relay(
    kafka: Any, spark: Any, tmp_path: Path
) -> None:
    source, sink = kafka.new_topic("lag-src"), kafka.new_topic("lag-sink")
    group = f"relay-{uuid.uuid4().hex[:8]}"
    config = DgmConfig(
        state_dir=tmp_path,
        collectors=CollectorSettings(interval_s=INTERVAL_S, include_topics=(f"^{source}$",)),
        analysis=AnalysisSettings(group_status_window=WINDOW),
    )
    truth, stop = Truth(), threading.Event()
    threads = [
        threading.Thread(target=produce, args=(kafka, source, truth, stop), daemon=True),
        threading.Thread(target=relay, args=(kafka, source, sink, group, truth, stop), daemon=True),
    ]
    with collecting(kafka.bootstrap_servers, config, INTERVAL_S):
        # Sampled before the first record: every arrival then lies between two samples.
        wait_until(
            lambda: read_samples(tmp_path)["offsets"].num_rows >= 2, 60, "two offsets samples"
        )
        for thread in threads:
            thread.start()
        # Mid-catch-up: released, and a status window of samples taken since.
        wait_until(lambda: truth.released_at > 0, 60, "the relay's first commit")
        wait_until(
            lambda: time.time() > truth.released_at + (WINDOW + 1) * INTERVAL_S, 60, "catch-up"
        )
        analysed_at = datetime.now(UTC)
        frames = analyze(
            spark,
            config,
            Fingerprints(spark.createDataFrame([], FINGERPRINT)),
            read_samples(tmp_path),
            analysed_at,
        )
        publish({t: frames[t] for t in ("group_status", "group_lag")}, tmp_path)
        wait_until(lambda: truth.caught_up_at() is not None, 120, "the relay to catch up")
    stop.set()
    for thread in threads:
        thread.join(30)

    with open_read_only(published_path(tmp_path)) as db:
        lags = db.execute(
            "SELECT epoch_ms(sampled_at) / 1000.0, committed_offset, lag_from_lso, lag_s, "
            "lag_s_resolution, lag_s_at_least FROM group_lag WHERE group_id = ? "
            "ORDER BY sampled_at",
            [group],
        ).fetchall()
        pace = db.execute(
            "SELECT epoch_ms(window_end) / 1000.0, catch_up_s, catching_up, lag_s_trend "
            "FROM group_status_by_group WHERE group_id = ?",
            [group],
        ).fetchone()
    behind = [row for row in lags if row[2] > 0]
    assert len(behind) >= HELD_BACK_S / INTERVAL_S / 2, lags
    misses = []
    for at, committed, _, lag_s, resolution, at_least in behind:
        true_lag = truth.lag_s(at, committed)
        if at_least:  # arrived before the first sample: a lower bound
            if lag_s > true_lag + 0.05:
                misses.append((at, committed, lag_s, true_lag, resolution, at_least))
        # The arrival lies between two samples: one interval, plus a cycle's own duration.
        elif resolution > 2 * INTERVAL_S + 1.0 or abs(lag_s - true_lag) > resolution:
            misses.append((at, committed, lag_s, true_lag, resolution, at_least))
    exact = [row for row in behind if not row[5]]
    assert len(exact) >= HELD_BACK_S / INTERVAL_S / 2, lags
    print(f"{len(behind)} samples behind; largest lag {max(r[3] for r in behind):.1f} s")
    assert misses == [], misses
    assert max(r[3] for r in behind) >= HELD_BACK_S / 2  # it really built up while held back

    assert pace is not None, "no group_status row for the relay's group"
    window_end, catch_up_s, catching_up, trend = pace
    caught_up_at = truth.caught_up_at()
    assert catching_up and trend < 0 and caught_up_at is not None
    predicted, left = window_end + catch_up_s, caught_up_at - window_end
    print(f"catch-up predicted in {catch_up_s:.1f} s, took {left:.1f} s")
    assert abs(predicted - caught_up_at) <= max(INTERVAL_S, left / 4)

    rule = AlertRule(name="late-relay", metric="lag_seconds", threshold=3.0)
    values = read_values(tmp_path, [rule], analysed_at)["late-relay"]
    assert isinstance(values, dict) and values[group] > 3.0
