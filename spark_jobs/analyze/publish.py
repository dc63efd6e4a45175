"""Publish a run's tables atomically: a new DuckDB file renamed over `<state_dir>/dgm.duckdb`.

Every table of dgm.contracts.published is created (empty when the run gave no rows), filled through
Arrow and given the views of dgm.contracts.published_views, then checkpointed and fsynced in a
hidden temp file beside the published one; `os.replace` then swaps it in. A reader that opened the
old file keeps reading it (POSIX rename keeps the open inode) and never blocks the writer; a
publish that dies before the rename leaves the published file untouched and at most a temp
file, which the next publish removes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import duckdb
import pyarrow as pa
from pyspark.sql import DataFrame

from dgm.contracts.published import TABLES, Table, published_path
from dgm.contracts.published_views import create_views
from dgm.util.durable import replace_whole

# A table's rows: Arrow, a Spark DataFrame, or a few rows as dicts (e.g. the runs row).
Published: TypeAlias = pa.Table | DataFrame | Sequence[Mapping[str, Any]]

# The contract's SQL types as Arrow types, for rows given as dicts.
ARROW_TYPES: dict[str, pa.DataType] = {
    "VARCHAR": pa.string(),
    "BIGINT": pa.int64(),
    "INTEGER": pa.int32(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "TIMESTAMPTZ": pa.timestamp("us", tz="UTC"),
    "VARCHAR[]": pa.list_(pa.string()),
}


def arrow_of(data: Published, table: Table) -> pa.Table:
    """`data` as Arrow; row dicts get `table`'s columns and types."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, DataFrame):
        return data.toArrow()
    schema = pa.schema([(c.name, ARROW_TYPES[c.sql_type]) for c in table.columns])
    return pa.Table.from_pylist([{n: row.get(n) for n in table.names} for row in data], schema)


def conform_arrow(data: pa.Table, table: Table) -> pa.Table:
    """`data` with exactly `table`'s columns, in order and of its types (null when absent)."""
    columns = []
    for column in table.columns:
        wanted = ARROW_TYPES[column.sql_type]
        if column.name in data.column_names:
            columns.append(data[column.name].cast(wanted))
        else:
            columns.append(pa.nulls(data.num_rows, wanted))
    return pa.Table.from_arrays(columns, names=list(table.names))


def write_tables(path: Path, tables: Mapping[str, Published]) -> None:
    """A complete DuckDB file at `path`: every contract table, filled from `tables`, and the
    views of dgm.contracts.published_views over them."""
    with duckdb.connect(str(path)) as connection:
        # A naive Arrow timestamp going into TIMESTAMPTZ is read as UTC, whatever the host says.
        connection.execute("SET TimeZone = 'UTC'")
        for table in TABLES:
            connection.execute(table.ddl())
            data = tables.get(table.name)
            if data is None:
                continue
            arrow = arrow_of(data, table)
            missing = [name for name in table.names if name not in arrow.column_names]
            if missing:
                raise ValueError(f"table {table.name!r} lacks columns {', '.join(missing)}")
            if arrow.num_rows == 0:
                continue
            connection.register("_rows", arrow.select(list(table.names)))
            columns = ", ".join(f'"{name}"' for name in table.names)
            connection.execute(
                f'INSERT INTO "{table.name}" ({columns}) SELECT {columns} FROM _rows'
            )
            connection.unregister("_rows")
        create_views(connection)
        connection.execute("CHECKPOINT")


def publish(tables: Mapping[str, Published], state_dir: Path) -> Path:
    """Write `tables` (name -> Arrow table, Spark DataFrame or list of row dicts) as the
    published DuckDB file of `state_dir`, atomically (dgm.util.durable.replace_whole); the
    published path. Missing tables are created empty; row dicts may leave out columns (null)."""
    unknown = sorted(set(tables) - {t.name for t in TABLES})
    if unknown:
        raise ValueError(f"not tables of the contract: {', '.join(unknown)}")
    return replace_whole(published_path(Path(state_dir)), lambda temp: write_tables(temp, tables))
