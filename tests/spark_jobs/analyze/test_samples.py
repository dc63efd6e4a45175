"""Reading the collectors' sample files on the driver: every readable file once, what
compaction and expiry change followed, damaged files set aside."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dgm.contracts.sample_schemas import SCHEMAS
from dgm.contracts.samples import compacted_name, file_name
from spark_jobs.analyze.samples import SampleReader, read_samples
from tests.support.analysis_world import samples


def test_samples_are_read_from_parquet_or_empty(tmp_path: Path) -> None:
    folder = tmp_path / "samples" / "events"
    folder.mkdir(parents=True)
    frame = samples()["events"]
    pq.write_table(frame, folder / "0000000000001-000000.parquet")
    (folder / ".123-4.parquet.tmp").write_bytes(b"half")
    read = read_samples(tmp_path)
    assert read["events"].num_rows == 8
    assert read["offsets"].num_rows == 0
    assert read["offsets"].schema == SCHEMAS["offsets"]


def test_a_sample_reader_reads_each_file_once_and_follows_compaction(tmp_path: Path) -> None:
    """A long-running analysis reads only the sample files new since its last cycle, and a
    compacted file replaces the ones it covers (their rows are not counted twice)."""
    folder = tmp_path / "samples" / "events"
    folder.mkdir(parents=True)
    events = samples()["events"]
    first, second = file_name(1, 0), file_name(2, 0)
    pq.write_table(events, folder / first)
    reader = SampleReader(tmp_path)
    opened: list[str] = []
    read = reader.store.read

    def counting(kind: str, paths: Any = None) -> pa.Table:
        opened.extend(p.name for p in paths)
        return read(kind, paths)

    reader.store.read = counting  # type: ignore[method-assign]
    assert reader.read("events").num_rows == 8
    pq.write_table(events.slice(0, 3), folder / second)
    assert reader.read("events").num_rows == 11
    assert opened == [first, second]
    pq.write_table(events.slice(0, 5), folder / compacted_name(first, second))
    assert reader.read("events").num_rows == 5
    (folder / first).unlink()
    (folder / second).unlink()
    assert reader.read("events").num_rows == 5
    assert opened == [first, second, compacted_name(first, second)]


def test_a_damaged_file_is_set_aside_and_a_vanished_one_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "samples" / "events"
    folder.mkdir(parents=True)
    events = samples()["events"]
    good, damaged, gone = file_name(1, 0), file_name(2, 0), file_name(3, 0)
    pq.write_table(events, folder / good)
    (folder / damaged).write_bytes(b"PAR1 not really")
    pq.write_table(events, folder / gone)
    reader = SampleReader(tmp_path)
    read = reader.store.read

    def vanishing(kind: str, paths: Any = None) -> pa.Table:
        chosen = list(paths)
        if chosen[0].name == gone:  # deleted by upkeep between listing and reading
            chosen[0].unlink()
        return read(kind, chosen)

    reader.store.read = vanishing  # type: ignore[method-assign]
    assert reader.read("events").num_rows == 8
    assert (folder / "damaged" / damaged).exists()
    assert sorted(p.name for p in folder.glob("*.parquet")) == [good]
