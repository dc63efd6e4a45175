"""The engine's duplicate metrics (copies, causes, per-topic summary, sequence gaps) equal the
DuckDB reference's on the same fingerprints: on small property-based sets; on a generated set
of 100k with injected duplicates, gaps and aborted records and every cause (whose summary a
plain-Python count checks as well); and on 1,000,000 fingerprints of
tests/support/generated_fingerprints.py read back from Parquet."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from dgm.contracts.vocabulary import LossCause
from spark_jobs.analyze import duplicates
from spark_jobs.schemas import FINGERPRINT
from tests.support import engine_run, reference
from tests.support.duplicate_comparison import SUMMARY, canonical
from tests.support.generated_fingerprints import pipeline
from tests.support.strength import by_strength, only_at_full_strength

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ARROW_FINGERPRINT = to_arrow_schema(FINGERPRINT)
COLUMNS = [f.name for f in FINGERPRINT.fields]


def assert_same(ours: list[dict[str, Any]], theirs: pa.Table, columns: list[str]) -> int:
    """The engine's rows equal the reference's on `columns`; the row count."""
    mine = canonical(ours, columns)
    assert mine == canonical(theirs.to_pylist(), columns)
    return len(mine)


def row(
    topic: str,
    partition: int,
    offset: int,
    at: datetime | None,
    message_id: str | None,
    producer: str | None,
    seq: int | None,
    lineage: str | None,
    committed: bool,
) -> dict[str, Any]:
    src: tuple[Any, ...] = (None, None, None)
    if lineage is not None:
        src_topic, src_partition, src_offset = lineage.rsplit("/", 2)
        src = (src_topic, int(src_partition), int(src_offset))
    values = (topic, partition, offset, at, message_id, None, producer, seq, lineage, *src)
    # filtered_by, filter_undecided_by, arrived_at, arrival_resolution_us: none.
    return dict(zip(COLUMNS, (*values, committed, None, None, None, None), strict=True))


def next_record_times(table: pa.Table) -> dict[tuple[str, int, str, int], Any]:
    """(topic, partition, producer, seq) -> the earliest timestamp of a record holding it."""
    found: dict[tuple[str, int, str, int], Any] = {}
    for r in table.to_pylist():
        if r["producer"] is None or r["seq"] is None or r["timestamp"] is None:
            continue
        key = (r["topic"], r["partition"], r["producer"], r["seq"])
        found[key] = min(found.get(key, r["timestamp"]), r["timestamp"])
    return found


def compare_all(
    spark: Any, table: pa.Table, frame: Any = None, sink: str = "t"
) -> tuple[dict[str, int], engine_run.Tables]:
    """Every duplicate metric of the engine (pipeline p: `s` into `sink`, over `frame`, else
    `table`) and of the reference: rows compared per metric, and the engine's tables."""
    tables = engine_run.run(spark, table if frame is None else frame, engine_run.config(sink))
    source = engine_run.of_topics(table, "s")
    copies = reference.duplicate_copies(table)
    first_copies = [r for r in tables.duplicates if r["copy_number"] == 1]
    # A topic that is no pipeline's sink takes its causes from the topics its dgm-src names.
    upstream = {r["src_topic"] for r in table.to_pylist() if r["topic"] == "s" and r["src_topic"]}
    plain_causes = reference.duplicate_causes(
        engine_run.of_topics(table, *upstream), engine_run.of_topics(table, "s")
    )
    # A gap counts once a record after it has a time (all do here: the cutoff is far).
    after = next_record_times(source)
    gaps = [
        g
        for g in reference.sequence_gaps(source).to_pylist()
        if (g["topic"], g["partition"], g["producer"], g["last_missing"] + 1) in after
    ]
    found_gaps = [
        r | {"first_missing": r["seq"]} for r in tables.lost if r["cause"] == LossCause.SEQUENCE_GAP
    ]
    gap_columns = ["topic", "partition", "producer", "first_missing", "missing"]
    compared = {
        "copies": assert_same(
            tables.duplicates, copies, [c for c in copies.column_names if not c.startswith("src_")]
        ),
        "summary": assert_same(tables.summary(), reference.duplicate_summary(table), SUMMARY),
        "causes": assert_same(
            [r for r in first_copies if r["topic"] == sink],
            reference.duplicate_causes(source, engine_run.of_topics(table, sink)),
            CAUSE_COLUMNS,
        ),
        "plain_causes": assert_same(
            [r for r in first_copies if r["topic"] == "s"], plain_causes, CAUSE_COLUMNS
        ),
        "gaps": assert_same(found_gaps, pa.Table.from_pylist(gaps), gap_columns)
        if gaps
        else len(found_gaps),
    }
    assert not gaps or compared["gaps"]  # no gap found where the reference has none
    return compared, tables


CAUSE_COLUMNS = ["topic", "message_id", "copies", "cause"]


# Small alphabets so ids, sessions, sequences, lineage and timestamps collide often.
RECORD = st.tuples(
    st.sampled_from(["s", "t"]),
    st.integers(0, 1),
    st.one_of(st.none(), st.integers(0, 3)),  # a null timestamp sorts first in both
    st.sampled_from([None, "i0", "i1", "i2", "i3"]),
    st.sampled_from([None, "p0", "p1"]),
    st.one_of(st.none(), st.integers(0, 6)),
    st.sampled_from([None, "s/0/0", "s/0/1", "s/1/0"]),
    st.sampled_from([True, True, False]),
)


def small_table(records: list[tuple[Any, ...]]) -> pa.Table:
    offsets: Counter[tuple[str, int]] = Counter()
    rows = []
    for topic, partition, second, message_id, producer, seq, lineage, committed in records:
        offset = offsets[topic, partition]
        offsets[topic, partition] += 1
        at = None if second is None else T0 + timedelta(seconds=second)
        rows.append(
            row(topic, partition, offset, at, message_id, producer, seq, lineage, committed)
        )
    return pa.Table.from_pylist(rows, schema=ARROW_FINGERPRINT)


# PySpark raises the recursion limit on first use, which Hypothesis reports; it is harmless.
@pytest.mark.filterwarnings("ignore:The recursion limit will not be reset")
@engine_run.spark_examples(by_strength(12, 25))  # DGM_LONG=1: 25 sets
@given(records=st.lists(RECORD, max_size=25))
def test_small_sets_agree(
    spark: Any, one_shuffle_partition: None, records: list[tuple[Any, ...]]
) -> None:
    compare_all(spark, small_table(records))


class Generated:
    """A source topic `s` and a sink `k` written the way the lab's pipelines fail: producer
    retries, aborted transactions, a processor crash that reprocesses, an aborted read, lost
    sends (sequence gaps) and records without an id; `expected_missing` counts the lost
    sequences the log can show (below a later one of the same session and partition)."""

    def __init__(self, per_topic: int, seed: int) -> None:
        self.random = random.Random(seed)
        self.rows: list[dict[str, Any]] = []
        self.offsets: Counter[tuple[str, int]] = Counter()
        self.next_seq: Counter[tuple[str, int]] = Counter()
        self.lost: list[tuple[str, str, int, int]] = []
        self.source: list[tuple[str, int, int, bool]] = []  # (id, partition, offset, committed)
        self.write_source(per_topic)
        self.write_sink()

    def send(self, topic: str, partition: int, producer: str, **fields: Any) -> list[int]:
        """Stamp the next sequence and write the record, unless the send is lost (0.5%);
        the offsets written."""
        seq = self.next_seq[producer, partition]
        self.next_seq[producer, partition] += 1
        if self.random.random() < 0.005:
            self.lost.append((topic, producer, partition, seq))
            return []
        copies = 2 if self.random.random() < 0.01 else 1  # a lost ack, retried: same seq
        offsets = []
        for _ in range(copies):
            offset = self.offsets[topic, partition]
            offsets.append(offset)
            self.offsets[topic, partition] += 1
            at = T0 + timedelta(seconds=len(self.rows) // 40)  # many cross-partition ties
            self.rows.append(
                row(topic, partition, offset, at, producer=producer, seq=seq, **fields)
            )
        return offsets

    def write_source(self, count: int) -> None:
        for n in range(count):
            producer = "src-a" if n < count // 2 else "src-b"  # a producer restart halfway
            partition = self.random.randrange(4)
            committed = self.random.random() >= 0.01  # ~1% in aborted transactions
            message_id = None if self.random.random() < 0.005 else f"m{n}"
            offsets = self.send(
                "s", partition, producer, message_id=message_id, lineage=None, committed=committed
            )
            if message_id is not None:
                self.source.extend((message_id, partition, o, committed) for o in offsets)

    def write_sink(self) -> None:
        # The processor reads read_uncommitted (exactly-once-broken), so 1 in 2 aborted
        # source records is processed too: an aborted read.
        read = [s for s in self.source if s[3] or self.random.random() < 0.5]
        crash = len(read) // 2
        rewound = [*read[:crash], *read[crash - 300 : crash], *read[crash:]]  # reprocess 300
        for n, (message_id, partition, offset, _) in enumerate(rewound):
            session = "proc-1" if n < crash else "proc-2"
            out = self.random.randrange(4)
            fields = {"message_id": message_id, "lineage": f"s/{partition}/{offset}"}
            if self.random.random() < 0.005:  # a sink transaction aborted, then redone
                self.send("k", out, session, committed=False, **fields)
            self.send("k", out, session, committed=True, **fields)

    def table(self) -> pa.Table:
        return pa.Table.from_pylist(self.rows, schema=ARROW_FINGERPRINT)

    def expected_summary(self) -> dict[str, tuple[int, int, int, int, int]]:
        """(records, distinct_ids, duplicate_copies, unidentified, aborted) per topic."""
        result = {}
        for topic in ("s", "k"):
            rows = [r for r in self.rows if r["topic"] == topic]
            ids = Counter(r["message_id"] for r in rows if r["committed"] and r["message_id"])
            unidentified = sum(1 for r in rows if r["committed"] and r["message_id"] is None)
            aborted = sum(1 for r in rows if not r["committed"])
            records = sum(ids.values()) + unidentified
            extra = sum(ids.values()) - len(ids)
            result[topic] = (records, len(ids), extra, unidentified, aborted)
        return result

    def expected_missing(self, topic: str) -> int:
        highest: dict[tuple[str, str, int], int] = defaultdict(lambda: -1)
        for r in self.rows:
            key = (r["topic"], r["producer"], r["partition"])
            highest[key] = max(highest[key], r["seq"])
        lost = [(t, p, part, seq) for t, p, part, seq in self.lost if t == topic]
        return sum(1 for t, p, part, seq in lost if seq < highest[t, p, part])


@pytest.mark.slow
def test_100k_generated_fingerprints_agree(spark: Any, tmp_path: Path) -> None:
    generated = Generated(per_topic=49_000, seed=5)
    table = generated.table()
    assert 95_000 <= table.num_rows <= 105_000
    # The reference reads Parquet fingerprints as it reads Arrow ones.
    pq.write_table(table, tmp_path / "fingerprints.parquet")
    from_file = reference.duplicate_summary(tmp_path / "fingerprints.parquet")
    assert from_file.sort_by("topic").equals(reference.duplicate_summary(table).sort_by("topic"))
    compared, tables = compare_all(spark, table, sink="k")

    summary = {
        r["topic"]: (
            r["records"], r["distinct_ids"], r["duplicate_copies"], r["unidentified"], r["aborted"]
        )
        for r in tables.summary()
    }  # fmt: skip
    assert summary == generated.expected_summary()
    gaps = sum(r["missing"] for r in tables.lost if r["cause"] == LossCause.SEQUENCE_GAP)
    assert gaps == generated.expected_missing("s") > 0
    causes = Counter(r["cause"] for r in tables.duplicates if r["topic"] == "k")
    # Every cause was injected: retried sink sends, the rewind, source retries carried through,
    # and aborted source records processed twice across the rewind.
    assert set(causes) >= set(duplicates.CAUSES), causes
    assert compared["copies"] > 1_000
    assert compared["causes"] > 300


@pytest.mark.slow
@only_at_full_strength  # CI: the 100k set and the small sets (DGM_LONG=1 runs 1M)
def test_1m_generated_fingerprints_agree(spark: Any, tmp_path: Path) -> None:
    generated = pipeline("m", sends=495_000, partitions=8, seed=13, topics=("s", "k"))
    table = pa.concat_tables([generated.source, generated.sink])
    assert 990_000 <= table.num_rows <= 1_010_000
    pq.write_table(table, tmp_path / "fingerprints.parquet")
    frame = spark.read.parquet(str(tmp_path / "fingerprints.parquet"))
    compared, _ = compare_all(spark, table, frame, sink="k")
    # ~1% of sends retried and ~1% of results written twice, out of ~500k each.
    assert compared["copies"] > 15_000 and compared["summary"] == 2, compared
    assert compared["causes"] > 5_000 and compared["gaps"] > 1_000, compared
