"""The idempotent sink's store: rows keyed by id and offsets in one transaction."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from lab.processors.sqlite_sink import (
    SinkRow,
    SinkStore,
    SinkStoreError,
    stored_ids,
    stored_offsets,
)


def row(message_id: str, offset: int) -> SinkRow:
    return SinkRow(message_id, b"V", "src", 0, offset)


def test_a_known_id_is_stored_once_and_offsets_move_with_the_rows(tmp_path: Path) -> None:
    path = tmp_path / "sink.sqlite"
    store = SinkStore(path, "lab_sink")
    assert store.store([row("a", 0), row("b", 1)], [("src", 0, 2)]) == 2
    # The same ids again (a duplicate upstream, or a replay): nothing new, offsets still move.
    assert store.store([row("a", 2), row("c", 3)], [("src", 0, 4)]) == 1
    assert store.next_offsets("src") == {0: 4}
    store.close()
    assert sorted(stored_ids(path, "lab_sink")) == ["a", "b", "c"]
    assert stored_offsets(path, "lab_sink", "src") == {0: 4}
    assert stored_offsets(path, "lab_sink", "other") == {}


def test_a_failed_write_stores_neither_rows_nor_offsets(tmp_path: Path) -> None:
    path = tmp_path / "sink.sqlite"
    store = SinkStore(path, "lab_sink")
    store.store([row("a", 0)], [("src", 0, 1)])
    bad = SinkRow("b", b"V", "src", 0, None)  # type: ignore[arg-type]  # NOT NULL violated
    with pytest.raises(sqlite3.IntegrityError):
        store.store([row("z", 1), bad], [("src", 0, 9)])
    assert store.next_offsets("src") == {0: 1}
    store.close()
    assert stored_ids(path, "lab_sink") == ["a"]


def test_wal_lets_a_reader_in_while_a_writer_holds_a_transaction(tmp_path: Path) -> None:
    path = tmp_path / "sink.sqlite"
    store = SinkStore(path, "lab_sink")
    store.store([row("a", 0)], [("src", 0, 1)])
    store.db.execute("BEGIN IMMEDIATE")
    try:
        assert stored_ids(path, "lab_sink") == ["a"]
    finally:
        store.db.execute("ROLLBACK")
        store.close()


def test_table_names_are_plain_identifiers(tmp_path: Path) -> None:
    with pytest.raises(SinkStoreError, match="expected letters"):
        SinkStore(tmp_path / "x.sqlite", "t; DROP TABLE x")


def test_offsets_of_a_store_not_yet_created_are_empty(tmp_path: Path) -> None:
    assert stored_offsets(tmp_path / "missing.sqlite", "lab_sink", "src") == {}
