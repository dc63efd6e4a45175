from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from collectors.events import Event
from dgm.contracts.sample_schemas import SCHEMAS
from dgm.contracts.samples import SampleStore, file_name, latest_rows, next_name, rows_table

AT = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def event(name: str = "collector_start", cluster_id: str = "c1") -> Event:
    return Event(AT, cluster_id, name, "detail")


def test_names_sort_in_write_order_even_when_the_clock_goes_back() -> None:
    assert file_name(1_700_000_000_000, 7) == "1700000000000-000007.parquet"
    assert next_name(None, 5) == (5, 0)
    assert next_name(file_name(5, 0), 9) == (9, 0)
    assert next_name(file_name(9, 0), 9) == (9, 1)  # same millisecond
    assert next_name(file_name(9, 3), 4) == (9, 4)  # clock went back: still after
    names = [file_name(5, 0), file_name(9, 0), file_name(9, 1), file_name(10, 0)]
    assert sorted(names) == names


def test_write_read_and_files_after(tmp_path: Path) -> None:
    store = SampleStore(tmp_path)
    assert store.files("events") == [] and store.latest("events") is None
    first = store.write("events", [event()])
    second = store.write("events", [event("outage_start"), event("outage_end")])
    assert store.files("events") == [first, second]
    assert first.name < second.name
    assert store.files_after("events", None) == [first, second]
    assert store.files_after("events", first.name) == [second]
    assert store.files_after("events", first) == [second]  # a path works too
    assert store.files_after("events", second.name) == []
    table = store.read("events")
    assert table.column("event").to_pylist() == ["collector_start", "outage_start", "outage_end"]
    assert table.column("sampled_at").to_pylist() == [AT] * 3


def test_files_carry_the_declared_schema_with_column_docs(tmp_path: Path) -> None:
    path = SampleStore(tmp_path).write("events", [event()])
    schema = pq.read_schema(path)
    assert schema.equals(SCHEMAS["events"], check_metadata=False)
    assert schema.field("event").metadata[b"doc"].startswith(b"collector_start")


def test_empty_sample_is_a_file_too(tmp_path: Path) -> None:
    # "Sampled, nothing there" must differ from "not sampled" for the analysis.
    path = SampleStore(tmp_path).write("producers", [])
    assert pq.read_table(path).num_rows == 0


def test_no_temp_file_is_left_and_no_file_overwritten(tmp_path: Path) -> None:
    store = SampleStore(tmp_path)
    paths = [store.write("events", [event()]) for _ in range(20)]
    assert len(set(paths)) == 20
    assert sorted(os.listdir(tmp_path / "samples" / "events")) == [p.name for p in paths]


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    store = SampleStore(tmp_path)
    with pytest.raises(ValueError, match="columns"):
        store.write("events", [{"sampled_at": AT, "cluster_id": "c1", "nonsense": 1}])
    with pytest.raises(pa.ArrowInvalid):  # wrong type for a column
        store.write("events", [{**rows_table("events", [event()]).to_pylist()[0], "before": "x"}])
    folder = tmp_path / "samples" / "events"
    assert not folder.exists() or os.listdir(folder) == []


def test_unknown_kind_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown sample kind 'offset'"):
        SampleStore(tmp_path).files("offset")


def test_latest_rows_are_those_of_the_newest_file_and_this_cluster(tmp_path: Path) -> None:
    store = SampleStore(tmp_path)
    store.write("events", [event("old")])
    store.write("events", [event("new"), event("other", cluster_id="c2")])
    assert [r["event"] for r in latest_rows(store, "events", "c1")] == ["new"]
    assert latest_rows(store, "offsets", "c1") == []


def test_sample_times_must_be_utc_aware(tmp_path: Path) -> None:
    naive = Event(AT.replace(tzinfo=None), "c1", "collector_start", "detail")
    with pytest.raises(ValueError, match="naive datetime"):
        SampleStore(tmp_path).write("events", [naive])
