"""The `expected` predicates in the audit: checked by Spark before anything is read, evaluated
into each fingerprint (NULL as undecided, never a failed audit), and a changed predicate
found from the batches' manifests."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dgm.config.document import DgmConfig
from dgm.config.pipelines import PipelineConfig
from dgm.config.problems import ConfigError
from spark_jobs.audit.batches import Batch
from spark_jobs.audit.expected import (
    KAFKA_SOURCE,
    check_predicates,
    recorded_predicates,
    stale_topics,
    with_expected,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def config(*expected: str) -> DgmConfig:
    pipelines = tuple(
        PipelineConfig(
            name=f"p{n}",
            source_topics=("s",),
            sink_topics=(f"k{n}",),
            consumer_group="g",
            declared_semantic="exactly-once",
            expected=e,
        )
        for n, e in enumerate(expected)
    )
    return DgmConfig(source=Path("dgm.toml"), pipelines=pipelines)


@pytest.mark.parametrize(
    ("predicate", "message"),
    [
        ("valu IS NOT NULL", r"pipelines\[1\]\.expected \(pipeline 'p1'\): not a Spark SQL"),
        ("value IS NOT NULL AND (", r"pipelines\[1\]\.expected \(pipeline 'p1'\): not a Spark SQL"),
        ("CAST(value AS STRING)", r"pipelines\[1\]\.expected .*got an expression of type string"),
    ],
)
def test_a_predicate_spark_cannot_use_is_a_config_error_naming_pipeline_and_key(
    spark: Any, predicate: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        check_predicates(spark, config("", predicate))


def test_records_are_marked_filtered_or_undecided_and_a_bad_cast_is_undecided(
    spark: Any,
) -> None:
    drops_tenths = "CAST(get_json_object(CAST(value AS STRING), '$.n') AS INT) % 10 != 0"
    cfg = config(drops_tenths, "key IS NOT NULL")
    check_predicates(spark, cfg)
    values = [b'{"n": 10}', b'{"n": 3}', b'{"n": "x"}', b"{broken", None]
    rows: list[tuple[Any, ...]] = [
        (None if n % 2 else b"k", v, "s", 0, n, T0, 0, []) for n, v in enumerate(values)
    ]
    rows.append((None, b'{"n": 10}', "k0", 0, 9, T0, 0, []))  # a sink record: no predicate
    marked = with_expected(spark.createDataFrame(rows, KAFKA_SOURCE), cfg)
    found = [
        (r["filtered_by"], r["filter_undecided_by"]) for r in marked.orderBy("offset").collect()
    ]
    assert found[:5] == [
        (["p0"], None),
        (["p1"], None),  # no key
        (None, ["p0"]),  # "x" is no number: NULL under the predicate, not a failed cast
        (["p1"], ["p0"]),  # broken JSON: undecided for p0; no key: filtered by p1
        (None, ["p0"]),  # no value
    ]
    assert found[5] == (None, None)


def test_a_changed_or_new_predicate_makes_its_source_topics_stale(tmp_path: Path) -> None:
    ranges = [{"topic": "s", "partition": 0, "start": 0, "end": 5}]
    old = Batch(tmp_path / "a", {"ranges": ranges})  # written before predicates were recorded
    marked = Batch(tmp_path / "b", {"ranges": ranges, "expected": {"p0": "x = 1"}})
    assert stale_topics(config(""), [old]) == {}
    assert stale_topics(config("x = 1"), [old]) == {"s": {"p0"}}
    assert stale_topics(config("x = 1"), [marked]) == {}
    assert stale_topics(config("x = 2"), [marked]) == {"s": {"p0"}}
    assert recorded_predicates(config("x = 1 ", ""), {"s"}) == {"p0": "x = 1", "p1": ""}
    assert recorded_predicates(config("x = 1"), {"other"}) == {}
