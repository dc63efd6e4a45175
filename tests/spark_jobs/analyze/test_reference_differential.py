"""Spark's duplicate metrics equal the DuckDB reference's on the same fingerprints: on small
property-based sets; on a generated set of 100k with injected duplicates, gaps and aborted
records and every cause (whose summary a plain-Python count checks as well); and on 1,000,000
fingerprints of tests/generated_fingerprints.py read back from Parquet."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from spark_jobs.analyze import duplicates
from spark_jobs.schemas import FINGERPRINT
from tests import reference
from tests.generated_fingerprints import pipeline

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ARROW_FINGERPRINT = to_arrow_schema(FINGERPRINT)
COLUMNS = [f.name for f in FINGERPRINT.fields]


def _value(v: Any) -> Any:
    if isinstance(v, datetime):  # naive from Spark (local = UTC here), aware from DuckDB
        return round(v.timestamp() * 1_000_000)
    if isinstance(v, float):
        return round(v, 12)
    return v


def canonical(rows: Iterable[Mapping[str, Any]], columns: list[str]) -> list[tuple[Any, ...]]:
    """Rows as sorted tuples of comparable values, nulls last within a column."""
    tuples = [tuple(_value(row[c]) for c in columns) for row in rows]
    return sorted(tuples, key=lambda t: tuple((v is None, "" if v is None else v) for v in t))


def assert_same(spark_frame: Any, reference_table: pa.Table) -> int:
    """Spark's result equals the reference's, column names and rows; the row count."""
    assert reference_table.column_names == spark_frame.columns
    ours = canonical((r.asDict() for r in spark_frame.collect()), spark_frame.columns)
    theirs = canonical(reference_table.to_pylist(), spark_frame.columns)
    assert ours == theirs
    return len(ours)


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
    return dict(zip(COLUMNS, (*values, committed), strict=True))


def compare_all(spark: Any, table: pa.Table, frame: Any = None) -> dict[str, int]:
    """Every metric on Spark (over `frame`, else `table`) and on the reference; rows compared
    per metric."""
    frame = spark.createDataFrame(table) if frame is None else frame
    source = frame.where(frame.topic == "s")
    sink = frame.where(frame.topic != "s")
    source_table = table.filter(pc.equal(table["topic"], "s"))
    sink_table = table.filter(pc.not_equal(table["topic"], "s"))
    return {
        "copies": assert_same(
            duplicates.duplicate_copies(frame), reference.duplicate_copies(table)
        ),
        "summary": assert_same(
            duplicates.duplicate_summary(frame), reference.duplicate_summary(table)
        ),
        "causes": assert_same(
            duplicates.duplicate_causes(source, sink),
            reference.duplicate_causes(source_table, sink_table),
        ),
        "gaps": assert_same(duplicates.sequence_gaps(frame), reference.sequence_gaps(table)),
        "gaps_inner": assert_same(
            duplicates.sequence_gaps(frame, None), reference.sequence_gaps(table, None)
        ),
    }


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


@pytest.fixture
def one_shuffle_partition(spark: Any) -> Iterator[None]:
    """Tiny sets gain nothing from parallel shuffles, and each task costs; results must not
    depend on partitioning anyway."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    try:
        yield
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


# PySpark raises the recursion limit on first use, which Hypothesis reports; it is harmless.
@pytest.mark.filterwarnings("ignore:The recursion limit will not be reset")
@settings(
    max_examples=25,
    deadline=None,
    # The fixture sets a session option once for all examples, on purpose.
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
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

    def expected_missing(self) -> int:
        highest: dict[tuple[str, str, int], int] = defaultdict(lambda: -1)
        for r in self.rows:
            key = (r["topic"], r["producer"], r["partition"])
            highest[key] = max(highest[key], r["seq"])
        return sum(1 for t, p, part, seq in self.lost if seq < highest[t, p, part])


@pytest.mark.slow
def test_100k_generated_fingerprints_agree(spark: Any, tmp_path: Path) -> None:
    generated = Generated(per_topic=49_000, seed=5)
    table = generated.table()
    assert 95_000 <= table.num_rows <= 105_000
    # The reference reads Parquet fingerprints as it reads Arrow ones.
    pq.write_table(table, tmp_path / "fingerprints.parquet")
    from_file = reference.duplicate_summary(tmp_path / "fingerprints.parquet")
    assert from_file.sort_by("topic").equals(reference.duplicate_summary(table).sort_by("topic"))
    frame = spark.createDataFrame(table)

    summary = {
        r.topic: (r.records, r.distinct_ids, r.duplicate_copies, r.unidentified, r.aborted)
        for r in duplicates.duplicate_summary(frame).collect()
    }
    assert summary == generated.expected_summary()
    gaps = duplicates.sequence_gaps(frame).groupBy().sum("missing").first()
    assert gaps is not None
    assert gaps[0] == generated.expected_missing() > 0
    causes = Counter(
        r.cause
        for r in duplicates.duplicate_causes(
            frame.where(frame.topic == "s"), frame.where(frame.topic == "k")
        ).collect()
    )
    # Every cause was injected: retried sink sends, the rewind, source retries carried through,
    # and aborted source records processed twice across the rewind.
    assert set(causes) >= set(duplicates.CAUSES), causes

    compared = compare_all(spark, table)
    assert compared["copies"] > 1_000
    assert compared["causes"] > 300


@pytest.mark.slow
def test_1m_generated_fingerprints_agree(spark: Any, tmp_path: Path) -> None:
    generated = pipeline("m", sends=495_000, partitions=8, seed=13, topics=("s", "k"))
    table = pa.concat_tables([generated.source, generated.sink])
    assert 990_000 <= table.num_rows <= 1_010_000
    pq.write_table(table, tmp_path / "fingerprints.parquet")
    frame = spark.read.parquet(str(tmp_path / "fingerprints.parquet"))
    compared = compare_all(spark, table, frame)
    # ~1% of sends retried and ~1% of results written twice, out of ~500k each.
    assert compared["copies"] > 15_000 and compared["summary"] == 2, compared
    assert compared["causes"] > 5_000 and compared["gaps"] > 1_000, compared
