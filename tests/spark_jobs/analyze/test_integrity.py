"""The truncations' tables on the driver (spark_jobs/analyze/integrity.py), from displaced
fingerprints made by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from dgm.contracts import published as tables
from dgm.contracts.fingerprints import DISPLACED
from dgm.contracts.vocabulary import Anomaly, LossCause
from spark_jobs.analyze import integrity
from spark_jobs.analyze.publish import conform_arrow
from tests.support import engine_run

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MINUTE = 60_000_000


def displaced(*rows: tuple[str, int, str | None, str | None, bool, int]) -> pa.Table:
    """(topic, offset, id audited, id now, committed, second) per displaced fingerprint."""
    return pa.Table.from_pylist(
        [
            {f.name: None for f in DISPLACED}
            | {"topic": topic, "partition": 0, "offset": offset, "message_id": was}
            | {"now_message_id": now, "committed": committed, "producer": "s", "seq": offset}
            | {"overwritten": now is not None}
            | {"timestamp": T0 + timedelta(seconds=second), "detected_at": T0}
            for topic, offset, was, now, committed, second in rows
        ],
        schema=DISPLACED,
    )


ASIDE = displaced(
    ("s", 5, "a5", "c5", True, 10),  # truncated, and its offset holds c5 now
    ("s", 6, "a6", None, True, 70),  # truncated, past the log end now
    ("s", 7, "a7", "c7", False, 70),  # aborted: only an inconsistent offset
    ("k", 1, "a1", None, True, 20),  # a sink copy truncated
)


def test_each_anomaly_is_a_row_with_its_jepsen_name() -> None:
    rows = integrity.log_anomalies(ASIDE).to_pylist()
    found = sorted((r["anomaly"], r["jepsen"], r["topic"], r["offset"]) for r in rows)
    assert found == [
        (Anomaly.INCONSISTENT_OFFSET.value, "inconsistent-offsets", "s", 5),
        (Anomaly.INCONSISTENT_OFFSET.value, "inconsistent-offsets", "s", 7),
        (Anomaly.TRUNCATED_RECORD.value, "lost-write", "k", 1),
        (Anomaly.TRUNCATED_RECORD.value, "lost-write", "s", 5),
        (Anomaly.TRUNCATED_RECORD.value, "lost-write", "s", 6),
    ]


def test_counts_per_topic_window_and_pipeline() -> None:
    held = conform_arrow(
        pa.table(
            {
                "topic": ["s", "s"],
                "window_start": pa.array([None, T0], pa.timestamp("us", tz="UTC")),
                "records": [9, 9],
            }
        ),
        tables.TOPIC_WINDOWS,
    )
    merged = integrity.with_topic_counts(held, integrity.topic_counts(ASIDE, MINUTE))
    by_window = {
        (r["topic"], r["window_start"]): (
            r["records"],
            r["truncated_records"],
            r["inconsistent_offsets"],
        )
        for r in merged.to_pylist()
    }
    assert by_window == {
        ("s", None): (9, 2, 2),
        ("s", T0): (9, 1, 1),
        ("s", T0 + timedelta(minutes=1)): (0, 1, 1),  # a window that holds anomalies only
        ("k", None): (0, 1, 0),
        ("k", T0): (0, 1, 0),
    }
    config = engine_run.config()  # pipeline p: s into k
    counts = integrity.pipeline_counts(ASIDE, config, MINUTE)
    assert sorted(map(tuple, counts.to_numpy().tolist())) == [
        ("p", 0.0 + T0.timestamp() * 1e6, 2, 1),  # s[5] and k[1]; s[5]
        ("p", T0.timestamp() * 1e6 + MINUTE, 1, 1),
    ]


def test_a_truncated_source_record_nobody_copied_is_lost_and_a_truncated_copy_names_the_cause() -> (
    None
):
    config = engine_run.config()
    cutoff = round((T0 + timedelta(seconds=30)).timestamp() * 1e6)
    losses = integrity.truncation_losses(ASIDE, config, {("p", "a6")}, {"p": cutoff})
    # s[5] is old enough and not copied; s[6] is younger than the cutoff (and copied anyway).
    assert [(r["pipeline"], r["message_id"], r["cause"]) for r in losses.added.to_pylist()] == [
        ("p", "a5", LossCause.TRUNCATION.value)
    ]
    assert losses.relabelled == {("p", "a1")}
    lost = conform_arrow(
        pa.table(
            {
                "pipeline": ["p", "p"],
                "message_id": ["a1", "x"],
                "cause": [LossCause.NOT_IN_SINK.value] * 2,
            }
        ),
        tables.LOST,
    )
    causes = integrity.relabel(lost, losses.relabelled)["cause"].to_pylist()
    assert causes == [LossCause.TRUNCATION.value, LossCause.NOT_IN_SINK.value]


def test_no_displaced_fingerprints_fill_zeros() -> None:
    held = conform_arrow(pa.table({"topic": ["s"], "records": [3]}), tables.TOPIC_WINDOWS)
    empty = DISPLACED.empty_table()
    merged = integrity.with_topic_counts(held, integrity.topic_counts(empty, MINUTE))
    assert merged.select(["records", "truncated_records", "inconsistent_offsets"]).to_pylist() == [
        {"records": 3, "truncated_records": 0, "inconsistent_offsets": 0}
    ]
    assert integrity.log_anomalies(empty).num_rows == 0
