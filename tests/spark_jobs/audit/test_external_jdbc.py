"""The incremental JDBC reader against a real PostgreSQL server: only the new rows, the
predicate pushed to the database, clear errors naming the pipeline and the key."""

from __future__ import annotations

import re
from typing import Any

import pytest

from dgm.config.external_sinks import ExternalSink
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.fingerprints import FINGERPRINT as ARROW_FINGERPRINT
from spark_jobs.audit.external import ExternalSinkError
from spark_jobs.audit.external_jdbc import driver_packages, read_incremental
from spark_jobs.schemas import FINGERPRINT
from tests.support.jdbc_sink import insert, make_table, pipeline
from tests.support.postgres import PostgresUnderTest


def test_two_incremental_reads_return_only_the_new_rows(
    spark: Any, postgres: PostgresUnderTest
) -> None:
    table = make_table(postgres)
    config = pipeline(postgres, table)
    insert(postgres, table, ["a", "b", "c"])
    first = read_incremental(spark, config, None)
    assert first.upto == 3
    names_types = [(f.name, f.dataType) for f in first.fingerprints.schema]
    assert names_types == [(f.name, f.dataType) for f in FINGERPRINT]
    rows = sorted(first.fingerprints.collect(), key=lambda r: r["offset"])
    assert [(r["offset"], r["message_id"]) for r in rows] == [(1, "a"), (2, "b"), (3, "c")]
    assert {r["topic"] for r in rows} == {f"external:orders-pg:{table}"}
    assert [(r["src_topic"], r["src_partition"], r["src_offset"]) for r in rows] == [
        ("src", 0, 0),
        ("src", 0, 1),
        ("src", 0, 2),
    ]
    assert all(r["lineage"] == f"src/0/{r['src_offset']}" and r["timestamp"] for r in rows)
    assert all(r["committed"] for r in rows)
    # The same rows as Arrow hold the core's FINGERPRINT schema (what snapshots are written in).
    assert first.fingerprints.toArrow().cast(ARROW_FINGERPRINT).num_rows == 3

    insert(postgres, table, ["d", "", "b"])
    second = read_incremental(spark, config, first.upto)
    got = sorted((r["offset"], r["message_id"]) for r in second.fingerprints.collect())
    assert got == [(4, "d"), (5, None), (6, "b")]  # an empty id is no id
    assert (second.after, second.upto) == (3, 6)

    nothing = read_incremental(spark, config, second.upto)
    assert nothing.fingerprints.count() == 0 and nothing.upto == 6


def test_the_database_receives_the_predicate_not_a_full_scan(
    spark: Any, postgres: PostgresUnderTest
) -> None:
    table = make_table(postgres)
    insert(postgres, table, [f"id-{n}" for n in range(50)])
    read = read_incremental(spark, pipeline(postgres, table), 40)
    plan = read.fingerprints._jdf.queryExecution().executedPlan().toString()
    assert re.search(r"PushedFilters: \[.*GreaterThan\(row_id,40\)", plan), plan
    assert "LessThanOrEqual(row_id,50)" in plan, plan
    assert read.fingerprints.count() == 10
    if postgres.log_path is None:
        pytest.skip("an external server: its statement log is not ours to read")
    statements = [
        line for line in postgres.logged_statements().splitlines() if f"FROM {table}" in line
    ]
    selects = [line for line in statements if "SELECT" in line and "1=0" not in line]
    assert selects, statements
    for line in selects:  # every query of the rows, and the bound, carries the predicate
        assert re.search(r'WHERE .*"row_id" > 40\b', line), line
    assert any('MAX("row_id")' in line for line in selects), selects


def test_a_timestamp_column_reads_incrementally_too(
    spark: Any, postgres: PostgresUnderTest
) -> None:
    table = make_table(postgres)
    config = pipeline(postgres, table, incremental_column="stored_at")
    insert(postgres, table, ["a", "b"])
    first = read_incremental(spark, config, None)
    assert sorted(r["message_id"] for r in first.fingerprints.collect()) == ["a", "b"]
    insert(postgres, table, ["c"])
    second = read_incremental(spark, config, first.upto)
    assert [r["message_id"] for r in second.fingerprints.collect()] == ["c"]


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"table": "no_such_table"}, "external_sink.table"),
        ({"id_column": "nope"}, "external_sink.id_column"),
        ({"incremental_column": "nope"}, "external_sink.incremental_column"),
        ({"incremental_column": "message_id"}, "external_sink.incremental_column"),
        ({"source_columns": ("source_topic", "gone")}, "external_sink.source_columns"),
    ],
)
def test_a_table_unlike_the_config_is_a_clear_error(
    spark: Any, postgres: PostgresUnderTest, changes: dict[str, Any], key: str
) -> None:
    changes = dict(changes)
    table = changes.pop("table", None) or make_table(postgres)
    with pytest.raises(ExternalSinkError) as raised:
        read_incremental(spark, pipeline(postgres, table, **changes), None)
    message = str(raised.value)
    assert "pipeline 'orders-pg'" in message and key in message, message


def test_the_driver_comes_from_the_sinks() -> None:
    pg = pipeline(PostgresUnderTest("h", 1, "u", "", "d", None), "t")
    other = PipelineConfig(
        name="other",
        source_topics=("a",),
        consumer_group="g",
        declared_semantic="exactly-once",
        external_sink=ExternalSink(
            table="t",
            id_column="id",
            kind="jdbc",
            url="jdbc:h2:mem:x",
            incremental_column="n",
            driver="org.h2.Driver",
            driver_package="com.h2database:h2:2.3.232",
        ),
    )
    assert driver_packages([pg, pg, other]) == (
        "org.postgresql:postgresql:42.7.10",
        "com.h2database:h2:2.3.232",
    )
