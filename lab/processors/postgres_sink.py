"""The lab's PostgreSQL sink: one row per processed record, and (optionally) the next source
offset per partition, written in ONE transaction.

The rows table has no unique key on the message id: a record processed twice is stored
twice. Whether that can happen is decided only by where the offsets live (postgres_modes).
`row_id` (BIGSERIAL) is what an incremental reader reads by; `stored_at` is the insert time.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from lab.processors.sqlite_sink import ID_COLUMN, SinkRow, checked_table

INCREMENTAL_COLUMN = "row_id"


def _offsets_table(table: str) -> sql.Identifier:
    return sql.Identifier(f"{table}_offsets")


def create_tables(db: psycopg.Connection, table: str) -> None:
    rows, offsets = sql.Identifier(checked_table(table)), _offsets_table(table)
    statements = (
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} ("
            "row_id BIGSERIAL PRIMARY KEY, {} TEXT NOT NULL, value BYTEA, "
            "source_topic TEXT NOT NULL, source_partition INTEGER NOT NULL, "
            "source_offset BIGINT NOT NULL, stored_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        ).format(rows, sql.Identifier(ID_COLUMN)),
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (topic TEXT NOT NULL, partition INTEGER NOT NULL, "
            "next_offset BIGINT NOT NULL, PRIMARY KEY (topic, partition))"
        ).format(offsets),
    )
    with db.transaction():
        for statement in statements:
            db.execute(statement)


class PostgresSink:
    def __init__(self, dsn: str, table: str) -> None:
        self.table = checked_table(table)
        self.db = psycopg.connect(dsn, autocommit=True)  # transactions begun explicitly below
        create_tables(self.db, self.table)

    def next_offsets(self, topic: str) -> dict[int, int]:
        """partition -> the next source offset to read, as stored with the rows."""
        query = sql.SQL("SELECT partition, next_offset FROM {} WHERE topic = %s").format(
            _offsets_table(self.table)
        )
        return {int(p): int(o) for p, o in self.db.execute(query, (topic,)).fetchall()}

    def store(self, rows: list[SinkRow], offsets: list[tuple[str, int, int]]) -> None:
        """The rows and the next offsets, atomically: both are stored or neither is."""
        insert = sql.SQL(
            "INSERT INTO {} ({}, value, source_topic, source_partition, source_offset) "
            "VALUES (%s, %s, %s, %s, %s)"
        ).format(sql.Identifier(self.table), sql.Identifier(ID_COLUMN))
        upsert = sql.SQL(
            "INSERT INTO {} VALUES (%s, %s, %s) ON CONFLICT (topic, partition) "
            "DO UPDATE SET next_offset = excluded.next_offset"
        ).format(_offsets_table(self.table))
        with self.db.transaction(), self.db.cursor() as cursor:
            if rows:
                cursor.executemany(
                    insert,
                    [
                        (r.message_id, r.value, r.source_topic, r.source_partition, r.source_offset)
                        for r in rows
                    ],
                )
            if offsets:
                cursor.executemany(upsert, offsets)

    def close(self) -> None:
        self.db.close()


def stored_offsets(dsn: str, table: str, topic: str) -> dict[int, int]:
    """partition -> next offset recorded in the store; {} before its tables exist."""
    with psycopg.connect(dsn, autocommit=True) as db:
        exists = db.execute("SELECT to_regclass(%s)", (f"{checked_table(table)}_offsets",))
        if exists.fetchone() == (None,):
            return {}
        query = sql.SQL("SELECT partition, next_offset FROM {} WHERE topic = %s").format(
            _offsets_table(table)
        )
        return {int(p): int(o) for p, o in db.execute(query, (topic,)).fetchall()}
