"""An external sink table (SQLite or DuckDB) read whole, as FINGERPRINT rows in Arrow.

Each row becomes a fingerprint of topic `external:<pipeline>:<table>` (PipelineConfig's
sink name), partition 0, offset = the row's rowid, message id from `id_column`, timestamp
from a `stored_at` column when the table has one (unix seconds, or a timestamp), lineage
from `source_columns` ('topic/partition/offset', one column holding it or one column per
part) parsed into src_*, committed true: what a table holds is what it committed.
The columns are computed with Arrow compute kernels, not per row in Python.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from dgm.config.external_sinks import ExternalSink
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.fingerprints import FINGERPRINT as ARROW_FINGERPRINT
from dgm.contracts.message_ids import SRC_OFFSET, SRC_PARTITION, SRC_TOPIC
from dgm.util.errors import UserFacingError

TIME_COLUMN = "stored_at"
# message_ids.SRC_PATTERN with the named groups Arrow's extract_regex wants. Arrow's RE2 reads
# it as Java does but for line terminators: its `.` takes all but '\n', its `$` passes none.
_SRC = f"^(?P<t>{SRC_TOPIC})/(?P<p>{SRC_PARTITION})/(?P<o>{SRC_OFFSET})$"
# Seconds an SQLite read waits for a writer's lock before giving up.
LOCK_TIMEOUT_S = 5.0


class ExternalSinkError(UserFacingError):
    """An external sink table dgm cannot read; the message names the pipeline and the path."""


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _query(sink: ExternalSink, present: set[str]) -> str:
    wanted = [sink.id_column, *sink.source_columns]
    missing = [c for c in wanted if c not in present]
    if missing:
        raise ValueError(f"table {sink.table!r} has no column {', '.join(map(repr, missing))}")
    timed = [TIME_COLUMN] if TIME_COLUMN in present else []
    columns = ", ".join(_quoted(c) for c in [*wanted, *timed])
    return f"SELECT rowid AS _rowid, {columns} FROM {_quoted(sink.table)} ORDER BY rowid"


def _read_sqlite(path: Path, sink: ExternalSink) -> pa.Table:
    uri = f"{path.resolve().as_uri()}?mode=ro"  # read-only: never creates or changes the file
    with sqlite3.connect(uri, uri=True, timeout=LOCK_TIMEOUT_S) as db:
        info = db.execute(f"PRAGMA table_info({_quoted(sink.table)})").fetchall()
        if not info:
            raise ValueError(f"no table {sink.table!r}")
        cursor = db.execute(_query(sink, {str(row[1]) for row in info}))
        names = [d[0] for d in cursor.description]
        found = cursor.fetchall()
    return pa.table({name: [row[i] for row in found] for i, name in enumerate(names)})


def _read_duckdb(path: Path, sink: ExternalSink) -> pa.Table:
    with duckdb.connect(str(path), read_only=True) as db:
        present = db.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ?",
            [sink.table],
        ).fetchall()
        if not present:
            raise ValueError(f"no table {sink.table!r}")
        return db.sql(_query(sink, {str(row[0]) for row in present})).to_arrow_table()


def _timestamps(column: pa.ChunkedArray) -> pa.ChunkedArray:
    target = ARROW_FINGERPRINT.field("timestamp").type
    if pa.types.is_timestamp(column.type):
        return column.cast(target)
    micros = pc.multiply(column.cast(pa.float64()), 1_000_000.0)
    return pc.cast(pc.round(micros), pa.int64()).cast(target)


def to_fingerprints(rows: pa.Table, sink: ExternalSink, topic: str) -> pa.Table:
    """FINGERPRINT rows (ARROW_FINGERPRINT) from the rows `_query` selects."""
    n = rows.num_rows
    ids = rows[sink.id_column].cast(pa.string())
    nothing = pa.nulls(n, pa.string())
    if len(sink.source_columns) == 1:
        lineage = rows[sink.source_columns[0]].cast(pa.string())
    elif sink.source_columns:
        parts = [rows[c].cast(pa.string()) for c in sink.source_columns]
        lineage = pc.binary_join_element_wise(*parts, "/")
    else:
        lineage = nothing
    parsed = pc.extract_regex(lineage, _SRC)  # null where it does not match
    columns = {
        "topic": pa.array([topic] * n, pa.string()),
        "partition": pa.array([0] * n, pa.int32()),
        "offset": rows["_rowid"].cast(pa.int64()),
        "timestamp": _timestamps(rows[TIME_COLUMN])
        if TIME_COLUMN in rows.column_names
        else pa.nulls(n, ARROW_FINGERPRINT.field("timestamp").type),
        "message_id": pc.if_else(pc.equal(ids, ""), None, ids),
        "key": nothing,
        "producer": nothing,
        "seq": pa.nulls(n, pa.int64()),
        "lineage": lineage,
        "src_topic": pc.struct_field(parsed, "t"),
        "src_partition": pc.struct_field(parsed, "p").cast(pa.int32()),
        "src_offset": pc.struct_field(parsed, "o").cast(pa.int64()),
        "committed": pa.array([True] * n, pa.bool_()),
        # A sink's rows: no pipeline's `expected` predicate applies to them.
        "filtered_by": pa.nulls(n, pa.list_(pa.string())),
        "filter_undecided_by": pa.nulls(n, pa.list_(pa.string())),
        # No LSO tells when a sink's row arrived.
        "arrived_at": pa.nulls(n, ARROW_FINGERPRINT.field("arrived_at").type),
        "arrival_resolution_us": pa.nulls(n, pa.int64()),
    }
    return pa.table(columns, schema=ARROW_FINGERPRINT)


def external_fingerprints(pipeline: PipelineConfig) -> pa.Table:
    """The whole external table of `pipeline` as fingerprints; ExternalSinkError if the
    file is missing, locked or not the table the config describes."""
    sink = pipeline.external_sink
    if sink is None:
        raise ValueError(f"pipeline {pipeline.name!r} has no external sink")
    if sink.path is None:  # postgresql/jdbc: read incrementally (external_jdbc)
        raise ValueError(f"pipeline {pipeline.name!r}: external sink {sink.kind} is no file")
    where = f"pipeline {pipeline.name!r}: external sink {sink.kind} file {sink.path}"
    if not sink.path.is_file():
        raise ExternalSinkError(f"{where} does not exist (check [pipelines] external_sink.path)")
    try:
        read = _read_sqlite if sink.kind == "sqlite" else _read_duckdb
        rows = read(sink.path, sink)
    except ValueError as error:
        raise ExternalSinkError(f"{where}: {error}") from None
    except (sqlite3.Error, duckdb.Error) as error:  # locked, corrupt, not a database
        locked = "lock" in str(error).lower()
        hint = " (locked by a writer; retry when it is done)" if locked else ""
        raise ExternalSinkError(f"{where}: cannot read it: {error}{hint}") from None
    return to_fingerprints(rows, sink, pipeline.sink_names()[-1])
