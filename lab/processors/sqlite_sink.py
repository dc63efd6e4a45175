"""The idempotent sink's external store: a SQLite file keyed by message id, with the next
source offset per partition stored in the same transaction as the rows."""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from dgm.util.errors import UserFacingError

ID_COLUMN = "message_id"
SOURCE_COLUMNS = ("source_topic", "source_partition", "source_offset")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SinkStoreError(UserFacingError):
    pass


@dataclass(frozen=True)
class SinkRow:
    message_id: str
    value: bytes | None
    source_topic: str
    source_partition: int
    source_offset: int


def _columns(row: SinkRow) -> tuple[str, bytes | None, str, int, int]:
    return row.message_id, row.value, row.source_topic, row.source_partition, row.source_offset


def checked_table(table: str) -> str:
    """The table name, if it is a plain identifier (it is written into SQL)."""
    if not _IDENTIFIER.fullmatch(table):
        raise SinkStoreError(f"sink table {table!r}: expected letters, digits and '_'")
    return table


class SinkStore:
    def __init__(self, path: Path, table: str) -> None:
        self.table = checked_table(table)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode: transactions are begun explicitly below.
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30)
        # WAL: readers (tests, dgm) never block the writer; FULL: a commit survives a crash.
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} ("
            f"{ID_COLUMN} TEXT PRIMARY KEY, value BLOB, source_topic TEXT NOT NULL, "
            "source_partition INTEGER NOT NULL, source_offset INTEGER NOT NULL, "
            "stored_at REAL NOT NULL)"
        )
        self.db.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table}_offsets ("
            "topic TEXT NOT NULL, partition INTEGER NOT NULL, next_offset INTEGER NOT NULL, "
            "PRIMARY KEY (topic, partition))"
        )

    def next_offsets(self, topic: str) -> dict[int, int]:
        """partition -> the next source offset to read, as stored with the rows."""
        rows = self.db.execute(
            f"SELECT partition, next_offset FROM {self.table}_offsets WHERE topic = ?", (topic,)
        )
        return {int(partition): int(offset) for partition, offset in rows}

    def store(self, rows: list[SinkRow], offsets: list[tuple[str, int, int]]) -> int:
        """Rows (a known id is skipped) and next offsets, atomically; the number of new rows."""
        now = time.time()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            before = self.db.total_changes
            self.db.executemany(
                f"INSERT INTO {self.table} VALUES (?, ?, ?, ?, ?, ?) "
                f"ON CONFLICT ({ID_COLUMN}) DO NOTHING",
                [(*_columns(r), now) for r in rows],
            )
            inserted = self.db.total_changes - before
            self.db.executemany(
                f"INSERT INTO {self.table}_offsets VALUES (?, ?, ?) "
                "ON CONFLICT (topic, partition) DO UPDATE SET next_offset = excluded.next_offset",
                offsets,
            )
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return inserted

    def close(self) -> None:
        self.db.close()


def stored_ids(path: Path, table: str) -> list[str]:
    """Every message id in the store, one per row (read-only; for reports and checks)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        query = f"SELECT {ID_COLUMN} FROM {checked_table(table)}"
        return [str(row[0]) for row in db.execute(query)]
    finally:
        db.close()


def stored_offsets(path: Path, table: str, topic: str) -> dict[int, int]:
    """partition -> next offset recorded in the store; {} before the store exists."""
    if not path.exists():
        return {}
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        rows = db.execute(
            f"SELECT partition, next_offset FROM {checked_table(table)}_offsets WHERE topic = ?",
            (topic,),
        )
        return {int(partition): int(offset) for partition, offset in rows}
    except sqlite3.OperationalError:  # the processor has not created its tables yet
        return {}
    finally:
        db.close()
