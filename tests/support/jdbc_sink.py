"""A PostgreSQL sink table on the tests' server, its rows, and the pipeline whose external sink
reads it through JDBC."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from dgm.config.external_sinks import ExternalSink
from dgm.config.pipelines import PipelineConfig
from tests.support.postgres import PostgresUnderTest

COLUMNS = ("source_topic", "source_partition", "source_offset")


def make_table(postgres: PostgresUnderTest) -> str:
    table = postgres.new_table_name("sink")
    with psycopg.connect(postgres.dsn) as db:
        db.execute(
            sql.SQL(
                "CREATE TABLE {} (row_id BIGSERIAL PRIMARY KEY, message_id TEXT, "
                "source_topic TEXT, source_partition INT, source_offset BIGINT, "
                "stored_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())"
            ).format(sql.Identifier(table))
        )
    return table


def insert(postgres: PostgresUnderTest, table: str, ids: list[str]) -> None:
    with psycopg.connect(postgres.dsn) as db:
        db.cursor().executemany(
            sql.SQL(
                "INSERT INTO {} (message_id, source_topic, source_partition, source_offset) "
                "VALUES (%s, 'src', 0, %s)"
            ).format(sql.Identifier(table)),
            [(i, n) for n, i in enumerate(ids)],
        )


def pipeline(postgres: PostgresUnderTest, table: str, **changes: Any) -> PipelineConfig:
    settings: dict[str, Any] = {
        "table": table,
        "id_column": "message_id",
        "kind": "postgresql",
        "source_columns": COLUMNS,
        "url": postgres.jdbc_url,
        "incremental_column": "row_id",
        "user": postgres.user,
        "password": postgres.password,
        **changes,
    }
    return PipelineConfig(
        name="orders-pg",
        source_topics=("orders",),
        consumer_group="g",
        declared_semantic="exactly-once",
        external_sink=ExternalSink(**settings),
    )
