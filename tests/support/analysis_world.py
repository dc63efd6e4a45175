"""One synthetic world of pipelines for analyze(), each built to reach one verdict: their
config, their fingerprints and the collectors' samples; every expected value is worked out
by hand beside the data (tests/spark_jobs/analyze/test_analyze.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from dgm.config.analysis import AnalysisSettings
from dgm.config.document import DgmConfig
from dgm.config.external_sinks import ExternalSink
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.sample_schemas import SCHEMAS

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)
MIN_RECORDS = 5


def at(second: float) -> datetime:
    return T0 + timedelta(seconds=second)


def naive(second: float) -> datetime:
    """How Spark hands a timestamp back (session time zone UTC, naive)."""
    return at(second).replace(tzinfo=None)


def fp(
    topic: str,
    offset: int,
    message_id: str | None,
    second: float,
    lineage: str | None = None,
    producer: str | None = None,
    seq: int | None = None,
    committed: bool = True,
    partition: int = 0,
) -> tuple[Any, ...]:
    src: tuple[Any, ...] = (None, None, None)
    if lineage is not None:
        src_topic, src_partition, src_offset = lineage.rsplit("/", 2)
        src = (src_topic, int(src_partition), int(src_offset))
    stamp = at(second)
    return (
        topic,
        partition,
        offset,
        stamp,
        message_id,
        None,
        producer,
        seq,
        lineage,
        *src,
        committed,
        None,  # filtered_by
        None,  # filter_undecided_by
        None,  # arrived_at
        None,  # arrival_resolution_us
    )


def pipeline(name: str, declared: Any, external: bool = False) -> PipelineConfig:
    return PipelineConfig(
        name=name,
        source_topics=(f"s-{name}",),
        sink_topics=() if external else (f"k-{name}",),
        consumer_group=f"g-{name}",
        declared_semantic=declared,
        external_sink=ExternalSink(Path("x.db"), "tbl", "id") if external else None,
    )


PIPELINES = (
    pipeline("eo", "exactly-once"),  # all delivered
    pipeline("alo", "at-least-once"),  # one reprocessed copy
    pipeline("amo", "exactly-once"),  # one lost
    pipeline("ng", "at-least-once"),  # one retried copy and one lost
    pipeline("ar", "exactly-once"),  # one aborted read
    pipeline("few", "at-most-once"),  # three records only
    pipeline("up", "exactly-once"),  # the source held an id twice
    pipeline("ext", "exactly-once", external=True),  # an idempotent external table
)
CONFIG = DgmConfig(
    analysis=AnalysisSettings(window_s=60, grace_s=30.0, min_records=MIN_RECORDS),
    pipelines=PIPELINES,
)


def world() -> list[tuple[Any, ...]]:
    """Ten source records per pipeline at seconds 0, 10, ..., 90 (windows 0 and 60), each
    copied to the sink a second later unless the pipeline's story says otherwise."""
    rows = []
    for p in PIPELINES:
        name = p.name
        source, sink = f"s-{name}", p.sink_names()[0]
        count = 3 if name == "few" else 10
        base = 1000 if name == "few" else 0
        for n in range(count):
            rows.append(fp(source, n, f"{name}{n}", base + 10 * n))
            if (name, n) in (("amo", 5), ("ng", 2)):
                continue  # lost
            if name == "ext" and n == 9:
                continue  # not written yet: above what the table holds, so not claimed
            writer, seq = ("w", n) if name == "ng" else (None, None)
            lineage = f"{source}/0/{n}"
            rows.append(fp(sink, n, f"{name}{n}", base + 10 * n + 1, lineage, writer, seq))
        # One record beyond the group's committed offset: unchecked, though not in the sink.
        rows.append(fp(source, 20, f"{name}-later", base + 95))
    rows += [
        fp("k-alo", 10, "alo3", 75, "s-alo/0/3"),  # reprocessed: same dgm-src
        fp("k-ng", 10, "ng4", 76, "s-ng/0/4", producer="w", seq=4),  # producer retry
        fp("s-ar", 11, "ar-x", 92, committed=False),  # aborted in the source ...
        fp("k-ar", 10, "ar-x", 93, "s-ar/0/11"),  # ... yet in the sink: aborted read
        fp("s-up", 11, "up3", 80),  # the source holds up3 twice ...
        fp("k-up", 10, "up3", 81, "s-up/0/11"),  # ... and so does the sink: upstream
        fp("k-eo", 10, None, 50),  # no id: unidentified
        # Plain topics: a producer retry, a copy without evidence, and a derived topic whose
        # duplicate its upstream (named in dgm-src) already held.
        fp("plain", 0, "p1", 5, producer="q", seq=0),
        fp("plain", 1, "p1", 6, producer="q", seq=0),
        fp("plain", 2, "p2", 65),
        fp("plain", 3, "p2", 66),
        fp("derived", 0, "p1", 7, "plain/0/0"),
        fp("derived", 1, "p1", 8, "plain/0/1"),
    ]
    return rows


def sample(kind: str, *rows: dict[str, Any]) -> pa.Table:
    schema = SCHEMAS[kind]
    defaults = {"cluster_id": "c", "group_state": "Stable", "detail": "", "hanging": False}
    defaults |= {"producer_epoch": 0, "last_sequence": 0, "coordinator_epoch": 0}
    full = [{**defaults, **row} for row in rows]
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in full], schema)


def samples() -> dict[str, pa.Table]:
    commits = [
        {"sampled_at": at(3000), "group_id": f"g-{p.name}", "topic": f"s-{p.name}"}
        | {"partition": 0, "committed_offset": 12 if p.name in ("ar", "up") else 10}
        for p in PIPELINES
        if p.name != "ext"
    ]
    # An older sample of g-eo committed less: the newest one counts.
    commits.append(
        {"sampled_at": at(2000), "group_id": "g-eo", "topic": "s-eo", "partition": 0}
        | {"committed_offset": 3, "lso": 11, "high_watermark": 12}
    )
    offsets = {"topic": "s-eo", "partition": 0, "log_start_offset": 0, "high_watermark": 12}
    offsets |= {"lso": 11, "lso_lag": 1, "lso_since": at(0), "lso_stuck_ms": 5}
    events = [
        {"sampled_at": at(50), "event": "rebalance", "group_id": "g-eo"},
        {"sampled_at": at(50), "event": "member_left", "group_id": "g-eo"},  # same cycle
        {"sampled_at": at(7200), "event": "member_joined", "group_id": "g-alo"},  # too late
        {"sampled_at": at(100), "event": "broker_left", "broker_id": 1},  # cluster-wide
        {"sampled_at": at(-3600), "event": "outage_start"},  # before any record
        {"sampled_at": at(60), "event": "epoch_bump", "producer_id": 77},  # on k-amo
        {"sampled_at": at(10), "event": "member_left", "group_id": "unmonitored"},
        {"sampled_at": at(1005), "event": "collector_start"},  # no fault
    ]
    producers = [
        {"sampled_at": at(3000), "topic": "k-amo", "partition": 0, "producer_id": 77},
        {"sampled_at": at(3000), "topic": "s-eo", "partition": 0, "producer_id": 5}
        | {"txn_start_offset": 11, "idle_ms": 900, "hanging": True, "hanging_reason": "old"},
        {"sampled_at": at(2000), "topic": "s-eo", "partition": 0, "producer_id": 6}
        | {"txn_start_offset": 4, "idle_ms": 10},  # open then, not at the last sample
    ]
    return {
        "group_offsets": sample("group_offsets", *commits),
        "offsets": sample("offsets", offsets | {"sampled_at": at(3000)}),
        "events": sample("events", *events),
        "producers": sample("producers", *producers),
    }
