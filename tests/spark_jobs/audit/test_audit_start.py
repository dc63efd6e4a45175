"""analysis.start and audit progress on a real broker and Spark: with "latest" the first
audit skips the old records (recorded as before the start, never audited or judged) and only
records produced afterwards are audited; with "earliest" the whole log is audited with a
progress line (records, rate, ETA) at least every period, mirrored in the progress file."""

from __future__ import annotations

import dataclasses
import itertools
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from dgm.config.analysis import AnalysisSettings
from dgm.config.document import DgmConfig
from dgm.contracts import headers
from dgm.util.progress import read_progress
from spark_jobs.audit.audit import audit
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.audit.store import FingerprintStore
from tests.support.audited_pipeline import config, pipeline, sample
from tests.support.strength import only_at_full_strength

SLACK_S = 2.0  # a loaded 2-core machine may run the ticker thread this late


def fill(kafka: Any, topic: str, first: int, count: int) -> float:
    """`count` records with dgm-id m<first>..; a fast confluent-kafka loop; seconds taken."""
    producer = Producer(
        kafka.client_config(
            acks="all", **{"linger.ms": 20, "batch.size": 1_000_000, "compression.type": "lz4"}
        )
    )
    began = time.monotonic()
    for n in range(first, first + count):
        while True:
            try:
                producer.produce(topic, value=b"v%d" % n, headers=[(headers.ID, b"m%d" % n)])
                break
            except BufferError:
                producer.poll(0.05)
        if n % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return time.monotonic() - began


def started_at(cfg: DgmConfig, start: str) -> DgmConfig:
    return dataclasses.replace(cfg, analysis=AnalysisSettings(start=start))


def timed(lines: list[tuple[float, str]]) -> Any:
    return lambda line: lines.append((time.monotonic(), line))


def assert_periodic(lines: list[tuple[float, str]], began: float, every_s: float) -> list[float]:
    """Progress lines came from the audit's start to its end, never `every_s` apart (+slack)."""
    marks = [began] + [t for t, line in lines if "offsets (" in line]
    marks.append(next(t for t, line in lines if "records from" in line))
    gaps = [b - a for a, b in itertools.pairwise(marks)]
    assert max(gaps) <= every_s + SLACK_S, gaps
    return gaps


def latest_then_new(spark: Any, kafka: Any, tmp_path: Path, old: int) -> dict[str, Any]:
    topic = kafka.new_topic("start-latest")
    fill_s = fill(kafka, topic, 0, old)
    cfg = started_at(config(tmp_path, pipeline(topic)), "latest")
    said: list[str] = []
    sample(kafka, tmp_path, topic)
    first = audit(spark, cfg, kafka.bootstrap_servers, said.append)
    assert first.records == {topic: 0}
    assert first.ranges == (OffsetRange(topic, 0, old, old, before_start=old),)
    assert FingerprintStore(tmp_path).audited_positions() == {(topic, 0): old}
    assert any(f"the {old} offsets before it are never audited" in line for line in said)

    fill(kafka, topic, old, 50)
    sample(kafka, tmp_path, topic)
    began = time.monotonic()
    second = audit(spark, cfg, kafka.bootstrap_servers, said.append)
    audit_s = time.monotonic() - began
    assert second.records == {topic: 50}
    assert second.ranges == (OffsetRange(topic, 0, old, old + 50),)
    rows = FingerprintStore(tmp_path).load(spark).select("offset", "message_id").collect()
    assert sorted(r.offset for r in rows) == list(range(old, old + 50))
    assert {r.message_id for r in rows} == {f"m{n}" for n in range(old, old + 50)}
    return {"fill_s": fill_s, "second_audit_s": audit_s}


def earliest_with_progress(
    spark: Any, kafka: Any, tmp_path: Path, records: int, every_s: float
) -> dict[str, Any]:
    topic = kafka.new_topic("start-earliest")
    fill_s = fill(kafka, topic, 0, records)
    cfg = config(tmp_path, pipeline(topic))
    assert cfg.analysis.start == "earliest"
    sample(kafka, tmp_path, topic)
    lines: list[tuple[float, str]] = []
    began = time.monotonic()
    result = audit(spark, cfg, kafka.bootstrap_servers, timed(lines), progress_every_s=every_s)
    audit_s = time.monotonic() - began
    assert result.records == {topic: records}
    gaps = assert_periodic(lines, began, every_s)
    ticks = [line for _, line in lines if "offsets (" in line]
    for at, line in lines:
        print(f"  +{at - began:6.1f}s {line}")  # the lines a benchmark report cites
    assert ticks[0].startswith("audit: reading: 0 records audited, 0 of ")
    assert all("records/s, ETA " in line for line in ticks)
    done = read_progress(tmp_path)
    assert done is not None and done.phase == "done"
    assert (done.records_done, done.offsets_done, done.offsets_total) == (records,) * 3
    return {"fill_s": fill_s, "audit_s": audit_s, "lines": len(ticks), "max_gap_s": max(gaps)}


def test_latest_audits_only_records_produced_after_the_start(
    spark: Any, kafka: Any, tmp_path: Path
) -> None:
    figures = latest_then_new(spark, kafka, tmp_path, 100_000)
    print(f"latest, 100k old records: {figures}")


def test_earliest_prints_progress_at_least_every_period(
    spark: Any, kafka: Any, tmp_path: Path
) -> None:
    figures = earliest_with_progress(spark, kafka, tmp_path, 100_000, every_s=1.0)
    print(f"earliest, 100k records, progress every 1 s: {figures}")


def test_a_duration_starts_at_the_first_record_that_recent(
    spark: Any, kafka: Any, tmp_path: Path
) -> None:
    topic = kafka.new_topic("start-duration")
    producer = Producer(kafka.client_config(acks="all"))
    now_ms = int(time.time() * 1000)
    for n, age_ms in enumerate([3 * 3600_000, 2 * 3600_000, 30 * 60_000, 60_000, 0]):
        stamp: list[tuple[str, str | bytes | None]] = [(headers.ID, b"m%d" % n)]
        producer.produce(topic, value=b"v%d" % n, headers=stamp, timestamp=now_ms - age_ms)
    assert producer.flush(30) == 0
    sample(kafka, tmp_path, topic)
    lines: list[str] = []
    result = audit(
        spark,
        started_at(config(tmp_path, pipeline(topic)), "1h"),
        kafka.bootstrap_servers,
        lines.append,
    )
    assert result.ranges == (OffsetRange(topic, 0, 2, 5, before_start=2),)
    assert result.records == {topic: 3}
    assert any("(analysis.start = '1h'); the 2 offsets before it" in line for line in lines)


@only_at_full_strength  # CI: the same two runs over 100k records (the tests above)
@pytest.mark.slow
def test_a_million_records_latest_then_earliest_with_progress_every_10_s(
    spark: Any, kafka: Any, tmp_path: Path
) -> None:
    latest = latest_then_new(spark, kafka, tmp_path / "latest", 1_000_000)
    print(f"latest, 1M old records: {latest}")
    earliest = earliest_with_progress(spark, kafka, tmp_path / "earliest", 1_000_000, 10.0)
    print(f"earliest, 1M records, progress every 10 s: {earliest}")
