"""The watch's file (dgm.watched): written whole every few seconds, and read back at start
so the duplicates seen before a restart stay published."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from dgm.durable import replace_whole
from dgm.published import open_read_only
from dgm.watched import SEEN_DUPLICATES, TABLES, WATCH_STATUS, watch_path

_ARROW = {
    "VARCHAR": pa.string(),
    "BIGINT": pa.int64(),
    "INTEGER": pa.int32(),
    "TIMESTAMPTZ": pa.timestamp("us", tz="UTC"),
}
Row = Mapping[str, Any]


def _arrow(rows: Sequence[Row], columns: Sequence[tuple[str, str]]) -> pa.Table:
    schema = pa.schema([(name, _ARROW[sql]) for name, sql in columns])
    return pa.Table.from_pylist([{n: row.get(n) for n, _ in columns} for row in rows], schema)


def publish(state_dir: Path, seen: Sequence[Row], status: Row) -> Path:
    """Replace `<state_dir>/watch.duckdb` with `seen` (SEEN_DUPLICATES rows) and `status`."""
    data = {SEEN_DUPLICATES.name: seen, WATCH_STATUS.name: [status]}

    def write(path: Path) -> None:
        with duckdb.connect(str(path)) as connection:
            connection.execute("SET TimeZone = 'UTC'")
            for table in TABLES:
                connection.execute(table.ddl())
                columns = [(c.name, c.sql_type) for c in table.columns]
                connection.register("_rows", _arrow(data[table.name], columns))
                connection.execute(f'INSERT INTO "{table.name}" SELECT * FROM _rows')
                connection.unregister("_rows")
            connection.execute("CHECKPOINT")

    return replace_whole(watch_path(state_dir), write)


def published_seen(state_dir: Path) -> list[dict[str, Any]]:
    """The SEEN_DUPLICATES rows of the watch's last file; none when there is none (or it
    cannot be read: the watch then starts afresh, and the analysis still finds them)."""
    try:
        with open_read_only(watch_path(state_dir)) as connection:
            table = connection.sql(f'SELECT * FROM "{SEEN_DUPLICATES.name}"').to_arrow_table()
    except (FileNotFoundError, duckdb.Error):
        return []
    return list(table.to_pylist())
