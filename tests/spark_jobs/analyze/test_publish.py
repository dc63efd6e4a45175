"""Publication: every contract table with its columns, atomic replacement under a reader,
and a publish that dies before the rename leaves the published file as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from dgm.contracts.published import FAULTS, TABLES, VERDICTS, open_read_only, published_path
from dgm.contracts.published_views import VIEWS
from dgm.contracts.vocabulary import GroupStatus
from dgm.util import durable as durable_module
from spark_jobs.analyze.publish import publish

AT = datetime(2026, 1, 1, 12, tzinfo=UTC)
MS = int(AT.timestamp() * 1000)  # (fetching a TIMESTAMPTZ into Python would need pytz)
# How DESCRIBE spells the contract's type names.
SPELLED = {"TIMESTAMPTZ": "TIMESTAMP WITH TIME ZONE"}


def faults(*details: str) -> pa.Table:
    return pa.table(
        {
            "at": pa.array([AT] * len(details), pa.timestamp("us", tz="UTC")),
            "event": ["rebalance"] * len(details),
            "group_id": ["g"] * len(details),
            "pipeline": [None] * len(details),
            "detail": list(details),
            "cluster": ["default"] * len(details),
        }
    )


def details(connection: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in connection.sql("SELECT detail FROM faults ORDER BY detail").fetchall()]


def test_every_table_is_created_with_the_contract_columns_even_when_empty(
    tmp_path: Path,
) -> None:
    path = publish({"faults": faults("one")}, tmp_path)
    assert path == tmp_path / "dgm.duckdb"
    with open_read_only(published_path(tmp_path)) as connection:
        for table in TABLES:
            described = connection.sql(f'DESCRIBE "{table.name}"').fetchall()
            assert [(r[0], r[1]) for r in described] == [
                (c.name, SPELLED.get(c.sql_type, c.sql_type)) for c in table.columns
            ]
        assert details(connection) == ["one"]
        assert connection.execute('SELECT epoch_ms("at") FROM faults').fetchone() == (MS,)
        assert connection.execute("SELECT count(*) FROM verdicts").fetchone() == (0,)
    assert [p.name for p in tmp_path.iterdir()] == ["dgm.duckdb"]  # no temp or WAL left


def test_the_views_resolve_in_the_read_only_publication(tmp_path: Path) -> None:
    # Created inside the published file, the views read its tables through the read-only
    # ATTACH of open_read_only: one level of detail each, the NULL markers gone.
    later = datetime(2026, 1, 1, 12, 1, tzinfo=UTC)
    publish(
        {
            "topic_windows": [
                {"topic": "t", "window_start": None, "records": 10},
                {"topic": "t", "window_start": AT, "records": 4},
                {"topic": "t", "window_start": later, "records": 6},
            ],
            "group_status": [
                {"group_id": "g", "status": GroupStatus.WARN, "severity": 1},
                {"group_id": "g", "topic": "t", "partition": 0, "status": GroupStatus.WARN},
                {"group_id": "g", "topic": "t", "partition": 1, "status": GroupStatus.OK},
            ],
            "partition_offsets": [
                {"sampled_at": AT, "topic": "t", "partition": 0, "lso_lag": 5},
                {"sampled_at": later, "topic": "t", "partition": 0, "lso_lag": 1},
                {"sampled_at": AT, "topic": "gone", "partition": 0, "lso_lag": 7},
            ],
            "group_lag": [
                {"sampled_at": AT, "group_id": "g", "topic": "t", "partition": 0},
                {"sampled_at": later, "group_id": "g", "topic": "t", "partition": 0},
            ],
        },
        tmp_path,
    )
    with open_read_only(published_path(tmp_path)) as db:
        found = db.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
        names = {name for (name,) in found}
        assert names == {view.name for view in VIEWS}

        def rows(sql: str) -> list[tuple[Any, ...]]:
            return db.execute(sql).fetchall()

        assert rows("SELECT topic, records FROM cumulative_topics") == [("t", 10)]
        assert "window_start" not in db.sql("SELECT * FROM cumulative_topics").columns
        assert rows("SELECT records FROM topic_window_series ORDER BY 1") == [(4,), (6,)]
        assert rows("SELECT group_id, status FROM group_status_by_group") == [("g", "WARN")]
        assert "topic" not in db.sql("SELECT * FROM group_status_by_group").columns
        assert rows('SELECT "partition" FROM group_status_by_partition ORDER BY 1') == [(0,), (1,)]
        assert rows("SELECT topic, lso_lag FROM latest_partition_offsets ORDER BY 1") == [
            ("gone", 7),
            ("t", 1),
        ]
        assert rows("SELECT epoch_ms(sampled_at) FROM latest_group_lag") == [
            (int(later.timestamp() * 1000),)
        ]


def test_columns_are_matched_by_name_and_extra_ones_are_ignored(tmp_path: Path) -> None:
    reordered = faults("x").select(["detail", "pipeline", "cluster", "group_id", "event", "at"])
    publish({"faults": reordered.append_column("extra", pa.array([1]))}, tmp_path)
    with open_read_only(published_path(tmp_path)) as connection:
        assert connection.sql("SELECT event, detail FROM faults").fetchall() == [("rebalance", "x")]


def test_missing_columns_and_unknown_tables_are_refused_and_publish_nothing(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match="lacks columns detail"):
        publish({"faults": faults("x").drop(["detail"])}, tmp_path)
    with pytest.raises(ValueError, match="not tables of the contract: nope"):
        publish({"nope": faults("x")}, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_reader_of_the_old_file_keeps_reading_it_while_a_new_run_lands(
    tmp_path: Path,
) -> None:
    publish({"faults": faults("first")}, tmp_path)
    reader = open_read_only(published_path(tmp_path))
    try:
        assert details(reader) == ["first"]
        publish({"faults": faults("second", "third")}, tmp_path)  # not blocked by the reader
        assert details(reader) == ["first"]  # the run it opened, whole
        with open_read_only(published_path(tmp_path)) as fresh:
            assert details(fresh) == ["second", "third"]
    finally:
        reader.close()


def test_a_publish_dying_before_the_rename_leaves_the_published_file_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish({"faults": faults("good")}, tmp_path)
    before = published_path(tmp_path).read_bytes()

    class FailingReplace:
        def __getattr__(self, name: str) -> Any:
            return getattr(os, name)

        def replace(self, *args: Any) -> None:
            raise OSError("killed before the rename")

    monkeypatch.setattr(durable_module, "os", FailingReplace())
    with pytest.raises(OSError, match="killed"):
        publish({"faults": faults("bad")}, tmp_path)
    monkeypatch.undo()
    assert published_path(tmp_path).read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["dgm.duckdb"]
    with open_read_only(published_path(tmp_path)) as connection:
        assert details(connection) == ["good"]


def test_a_temp_file_left_by_a_killed_publish_is_ignored_then_removed(tmp_path: Path) -> None:
    publish({"faults": faults("good")}, tmp_path)
    # A publish killed by SIGKILL leaves its half-written temp file (pid gone) behind.
    dead_pid = 2**22 + 17  # above the default pid_max: no such process
    left = tmp_path / f".dgm.duckdb.{dead_pid}.123.tmp"
    left.write_bytes(b"half a DuckDB file")
    with open_read_only(published_path(tmp_path)) as connection:
        assert details(connection) == ["good"]
    publish({"faults": faults("next")}, tmp_path)
    assert not left.exists()
    with open_read_only(published_path(tmp_path)) as connection:
        assert details(connection) == ["next"]


def test_a_temp_file_of_a_live_publish_is_left_alone(tmp_path: Path) -> None:
    live = tmp_path / f".dgm.duckdb.{os.getppid()}.1.tmp"
    live.write_bytes(b"")
    publish({}, tmp_path)
    assert live.exists()


def test_spark_dataframes_are_published_through_arrow(spark: Any, tmp_path: Path) -> None:
    frame = spark.createDataFrame(
        [("p", "exactly-once", ["s1", "s2"], AT, 7)],
        "pipeline string, declared string, source_topics array<string>, "
        "first_record_at timestamp, records_checked long",
    )
    full = frame.select(
        *(
            frame[c.name] if c.name in frame.columns else F.lit(None).alias(c.name)
            for c in VERDICTS.columns
        )
    )
    publish({"verdicts": full, "faults": faults("f")}, tmp_path)
    with open_read_only(published_path(tmp_path)) as connection:
        got = connection.sql(
            "SELECT pipeline, source_topics, epoch_ms(first_record_at), records_checked "
            "FROM verdicts"
        ).fetchall()
    assert got == [("p", ["s1", "s2"], MS, 7)]
    assert FAULTS.name == "faults"


READER = """
import sys
from dgm.contracts.published import open_read_only, published_path
connection = open_read_only(published_path(sys.argv[1]))
def show():
    rows = connection.execute("SELECT detail FROM faults ORDER BY detail").fetchall()
    print(",".join(r[0] for r in rows), flush=True)
show()
sys.stdin.readline()
show()
"""


def test_a_reader_process_keeps_its_run_and_does_not_block_the_writer(tmp_path: Path) -> None:
    publish({"faults": faults("first")}, tmp_path)
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    try:
        assert reader.stdout is not None and reader.stdin is not None
        assert reader.stdout.readline().strip() == "first"
        publish({"faults": faults("second")}, tmp_path)  # while the reader holds the file
        with open_read_only(published_path(tmp_path)) as connection:
            assert details(connection) == ["second"]
        reader.stdin.write("\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == "first"
        assert reader.wait(timeout=30) == 0
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()


def test_rows_given_as_dicts_are_typed_by_the_contract(tmp_path: Path) -> None:
    run = {"run_id": "r1", "started_at": AT, "fingerprints": 5, "window_s": 60}
    publish({"runs": [run]}, tmp_path)
    with open_read_only(published_path(tmp_path)) as connection:
        got = connection.execute(
            "SELECT run_id, epoch_ms(started_at), fingerprints, window_s, spark_master FROM runs"
        ).fetchall()
    assert got == [("r1", MS, 5, 60, None)]


def test_a_damaged_publication_is_an_error_to_readers_and_replaced_by_the_next_publish(
    tmp_path: Path,
) -> None:
    publish({"faults": faults("before")}, tmp_path)
    path = published_path(tmp_path)
    path.write_bytes(path.read_bytes()[:4096])  # truncated on disk
    with pytest.raises(duckdb.Error):
        open_read_only(path).close()
    publish({"faults": faults("after")}, tmp_path)
    with open_read_only(path) as connection:
        assert details(connection) == ["after"]
