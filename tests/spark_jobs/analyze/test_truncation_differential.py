"""Truncations found by the audit's re-read (spark_jobs/audit/truncation.py: plan, windows
read lower, rewrite of the store) and published by the analysis (analysis.analyze) equal the
DuckDB reference's, which looks at every audited offset at once: the truncated records and
inconsistent offsets, and every lost row with its cause.

A pipeline p reads source `s` (two partitions) into sink `k`; each partition's records as
audited are cut at some offset and written over (a truncation) or not, the collectors having
seen the move back or not; the records Kafka holds now are what the re-read reads and what
the reference judges, as the Spark Kafka source would give them (raw rows with headers).
Four examples by default (each is a re-read and an analysis on Spark), 40 with DGM_LONG=1."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from dgm.config.pipelines import MessageIdRule
from dgm.contracts import headers
from dgm.contracts.sample_schemas import SCHEMAS
from dgm.contracts.samples import PartitionOffsets, SampleStore
from spark_jobs.analysis_input import Fingerprints
from spark_jobs.analyze.analysis import analyze
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.audit.record_columns import fingerprints
from spark_jobs.audit.store import FingerprintStore
from spark_jobs.audit.truncation import reread
from spark_jobs.schemas import FINGERPRINT
from tests.support import engine_run, reference
from tests.support.strength import by_strength

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ARROW_FINGERPRINT = to_arrow_schema(FINGERPRINT)
RULE = MessageIdRule()
RULES = {"s": RULE, "k": RULE}
ENDS = pa.schema(
    [("topic", pa.string()), ("partition", pa.int32()), ("high_watermark", pa.int64())]
)
# (id, second, producer's seq or None) of one record; ids from a small alphabet collide.
RECORD = st.tuples(
    st.sampled_from(["i0", "i1", "i2", "i3", "i4", "i5", None]),
    st.integers(0, 9),
    st.one_of(st.none(), st.integers(0, 6)),
)
# A partition: its records as audited; where its log was cut (None: never) and what was
# written after; whether the collectors saw its high watermark go back.
PARTITION = st.tuples(
    st.lists(RECORD, min_size=1, max_size=8),
    st.one_of(st.none(), st.integers(0, 8)),
    st.lists(RECORD, max_size=5),
    st.booleans(),
)


def row(topic: str, partition: int, offset: int, record: tuple[Any, ...]) -> dict[str, Any]:
    message_id, second, seq = record
    names = [f.name for f in FINGERPRINT.fields]
    values = dict.fromkeys(names)
    values |= {"topic": topic, "partition": partition, "offset": offset, "committed": True}
    values |= {"timestamp": T0 + timedelta(seconds=second), "message_id": message_id}
    values |= {"key": f"{message_id}-{second}", "producer": None if seq is None else "w"}
    return values | {"seq": seq}


def logs(
    parts: Sequence[tuple[Any, ...]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[tuple[str, int], bool]]:
    """(rows as audited, rows Kafka holds now, partition -> whether its move back was seen)
    of source partitions 0 and 1 and sink partition 0, in that order of `parts`."""
    where = [("s", 0), ("s", 1), ("k", 0)]
    audited, held, seen = [], [], {}
    for (topic, partition), (records, cut, written, saw) in zip(where, parts, strict=True):
        audited += [row(topic, partition, n, r) for n, r in enumerate(records)]
        now = records if cut is None else records[: min(cut, len(records))] + written
        held += [row(topic, partition, n, r) for n, r in enumerate(now)]
        seen[(topic, partition)] = saw and cut is not None
    return audited, held, seen


KAFKA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key: string, value: binary>>"
)


def kafka_rows(spark: Any, held: list[dict[str, Any]]) -> DataFrame:
    """What the Spark Kafka source gives for the `held` records (headers stamped as the lab's
    producers stamp them)."""

    def stamped(r: dict[str, Any]) -> list[tuple[str, bytes]]:
        found = [(headers.ID, r["message_id"]), (headers.PRODUCER, r["producer"])]
        found.append((headers.SEQ, None if r["seq"] is None else str(r["seq"])))
        return [(name, value.encode()) for name, value in found if value is not None]

    rows = [
        (r["key"].encode(), b"v", r["topic"], r["partition"], r["offset"], r["timestamp"], 0,
         stamped(r))
        for r in held
    ]  # fmt: skip
    frame: DataFrame = spark.createDataFrame(rows, KAFKA)
    return frame


def of_ranges(records: DataFrame, ranges: Sequence[OffsetRange]) -> DataFrame:
    wanted = F.lit(False)
    for r in ranges:
        wanted |= (
            (F.col("topic") == r.topic)
            & (F.col("partition") == r.partition)
            & F.col("offset").between(r.start, r.end - 1)
        )
    return records.where(wanted)


def product(
    spark: Any,
    state: Path,
    audited: list[dict[str, Any]],
    held: list[dict[str, Any]],
    seen: dict[tuple[str, int], bool],
    commits: dict[int, int],
    now: datetime,
) -> dict[str, list[dict[str, Any]]]:
    """The audit's re-read over the store of `audited`, then the analysis' tables."""
    store = FingerprintStore(state)
    samples = SampleStore(state)
    keys = sorted({(r["topic"], r["partition"]) for r in audited})
    ends = {k: sum(1 for r in audited if (r["topic"], r["partition"]) == k) for k in keys}
    now_ends = {k: sum(1 for r in held if (r["topic"], r["partition"]) == k) for k in keys}
    frame = spark.createDataFrame(pa.Table.from_pylist(audited, schema=ARROW_FINGERPRINT))
    held_frame = kafka_rows(spark, held)
    ranges = [OffsetRange(t, p, 0, ends[(t, p)]) for t, p in keys]
    with store.writer_lock():
        store.write_batch(spark, frame, ranges, RULES)
    events = [
        {"sampled_at": now, "cluster_id": "c", "event": "high_watermark_backwards"}
        | {"detail": "", "topic": t, "partition": p, "before": ends[(t, p)]}
        | {"after": now_ends[(t, p)]}
        for (t, p), saw in seen.items()
        if saw and now_ends[(t, p)] < ends[(t, p)]
    ]
    if events:
        samples.write_table("events", pa.Table.from_pylist(events, schema=SCHEMAS["events"]))
    sampled = [PartitionOffsets(t, p, 0, now_ends[(t, p)], now_ends[(t, p)]) for t, p in keys]

    def read(wanted: Sequence[OffsetRange]) -> DataFrame:
        return of_ranges(held_frame, wanted)

    def fingerprint(wanted: Sequence[OffsetRange]) -> tuple[DataFrame, Any]:
        return fingerprints(read(wanted), RULE), lambda: None

    with store.writer_lock():
        report = reread(
            spark, store, samples, sampled, RULES, 1.0, 10_000, read, fingerprint, lambda _: None
        )
        # What the next audit reads: from where each partition's audited range ends now.
        after = store.audited_positions()
        more = [OffsetRange(t, p, after[(t, p)], now_ends[(t, p)]) for t, p in keys]
        more = [r for r in more if r.size > 0]
        if more:
            store.write_batch(spark, fingerprint(more)[0], more, RULES)
    assert report.offsets > 0 or not audited
    group = [
        {"sampled_at": now, "cluster_id": "c", "group_id": "g", "topic": "s", "partition": p}
        | {"committed_offset": o, "group_state": "Stable"}
        for p, o in commits.items()
    ]
    found = analyze(
        spark,
        engine_run.config(),
        Fingerprints(kept=store.load(spark), displaced=store.displaced()),
        {"group_offsets": pa.Table.from_pylist(group, schema=SCHEMAS["group_offsets"])},
        now,
    )
    return {name: _rows(found[name]) for name in ("log_anomalies", "lost", "verdicts")}


def _rows(table: Any) -> list[dict[str, Any]]:
    if isinstance(table, pa.Table):
        rows: list[dict[str, Any]] = table.to_pylist()
        return rows
    if isinstance(table, list):
        return list(table)
    return [r.asDict() for r in table.collect()]


def _at(value: Any) -> Any:
    return round(value.replace(tzinfo=UTC).timestamp()) if isinstance(value, datetime) else value


def canonical(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> list[tuple[Any, ...]]:
    found = [tuple(_at(r[c]) for c in columns) for r in rows]
    return sorted(found, key=lambda t: tuple((v is None, "" if v is None else v) for v in t))


ANOMALY = ["anomaly", "topic", "partition", "offset", "message_id", "now_message_id"]
LOST = ["message_id", "topic", "partition", "offset", "producer", "seq", "missing", "cause"]


def expected(
    audited: list[dict[str, Any]],
    held: list[dict[str, Any]],
    commits: dict[int, int],
    cutoff: datetime,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(anomalies, lost rows) of the reference."""
    audited_t = pa.Table.from_pylist(audited, schema=ARROW_FINGERPRINT)
    held_t = pa.Table.from_pylist(held, schema=ARROW_FINGERPRINT)
    keys = sorted({(r["topic"], r["partition"]) for r in audited})
    ends = pa.Table.from_pylist(
        [
            {
                "topic": t,
                "partition": p,
                "high_watermark": sum(1 for r in held if (r["topic"], r["partition"]) == (t, p)),
            }
            for t, p in keys
        ],
        schema=ENDS,
    )
    anomalies = reference.truncations(audited_t, held_t, ends).to_pylist()
    gone = [a for a in anomalies if a["anomaly"] == "truncated record"]
    truncated_source = [a for a in gone if a["topic"] == "s"]
    sink_now = held_t.filter(pa.compute.equal(held_t["topic"], "k"))
    source_now = held_t.filter(pa.compute.equal(held_t["topic"], "s"))
    # Truncated records of producer sessions reached Kafka: present in the sequence runs (as
    # records nobody checks), never a sequence gap too.
    present = [
        row("s", a["partition"], a["offset"], (a["message_id"], 0, a["seq"]))
        | {"committed": False, "timestamp": a["timestamp"]}
        for a in truncated_source
    ]
    source = pa.concat_tables([source_now, pa.Table.from_pylist(present, schema=ARROW_FINGERPRINT)])
    committed = pa.Table.from_pylist(
        [{"topic": "s", "partition": p, "committed_offset": o} for p, o in commits.items()],
        schema=pa.schema(
            [("topic", pa.string()), ("partition", pa.int32()), ("committed_offset", pa.int64())]
        ),
    )
    lost = reference.lost(source, sink_now, committed, cutoff).to_pylist()
    copies_gone = {a["message_id"] for a in gone if a["topic"] == "k"}
    for r in lost:
        if r["cause"] == "not in sink" and r["message_id"] in copies_gone:
            r["cause"] = "truncation"
    truncation_rows = (
        reference.truncation_lost(
            pa.Table.from_pylist(truncated_source), sink_now, cutoff
        ).to_pylist()
        if truncated_source
        else []
    )
    return anomalies, lost + truncation_rows


@pytest.mark.filterwarnings("ignore:The recursion limit will not be reset")
@engine_run.spark_examples(by_strength(4, 40))
@given(
    parts=st.tuples(PARTITION, PARTITION, PARTITION),
    commits=st.dictionaries(st.integers(0, 1), st.integers(0, 10), max_size=2),
)
def test_truncations_agree(
    spark: Any,
    one_shuffle_partition: None,
    tmp_path_factory: pytest.TempPathFactory,
    parts: tuple[tuple[Any, ...], ...],
    commits: dict[int, int],
) -> None:
    audited, held, seen = logs(parts)
    now = T0 + timedelta(seconds=5)  # grace 0: records of seconds 0-4 are judged
    state = tmp_path_factory.mktemp("truncation")
    ours = product(spark, state, audited, held, seen, commits, now)
    anomalies, lost = expected(audited, held, commits, now)
    assert canonical(ours["log_anomalies"], ANOMALY) == canonical(anomalies, ANOMALY)
    assert canonical(ours["lost"], LOST) == canonical(lost, LOST)
    (verdict,) = ours["verdicts"]
    assert verdict["truncated_records"] == sum(
        1 for a in anomalies if a["anomaly"] == "truncated record"
    )
    assert verdict["inconsistent_offsets"] == len(anomalies) - verdict["truncated_records"]
