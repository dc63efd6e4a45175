"""The queries read the published file read-only, per snapshot, and see a new publication."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from dashboard import queries
from tests.support.published_world.publish import recent_copy


@pytest.fixture
def state_dir(tmp_path: Path, use_state_dir: Callable[[Path], None]) -> Path:
    use_state_dir(tmp_path)
    recent_copy(tmp_path)
    return tmp_path


def _republish_without(state_dir: Path, pipeline: str) -> None:
    """What `dgm analyze` does: a new file, renamed over the published one."""
    path = state_dir / "dgm.duckdb"
    new = state_dir / "next.duckdb"
    new.write_bytes(path.read_bytes())
    with duckdb.connect(str(new)) as con:
        con.execute("DELETE FROM verdicts WHERE pipeline = ?", [pipeline])
    stat = path.stat()
    os.replace(new, path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_a_new_publication_is_read(state_dir: Path) -> None:
    assert len(queries.verdicts()) == 3
    assert len(queries.verdicts()) == 3  # cached
    _republish_without(state_dir, "audit-trail")
    assert list(queries.verdicts()["pipeline"]) == ["orders-alo", "payments-eos"]


def test_reads_leave_the_file_as_it_was(state_dir: Path) -> None:
    path = state_dir / "dgm.duckdb"
    before = (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    names = sorted(p.name for p in state_dir.iterdir())
    queries.check()
    for read in (queries.runs, queries.verdicts, queries.latest_offsets, queries.transactions):
        read()
    queries.duplicates("payments-ledger")
    assert (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest()) == before
    assert sorted(p.name for p in state_dir.iterdir()) == names  # no WAL, no temp files


def test_cluster_summary(state_dir: Path) -> None:
    assert queries.cluster_summary() == {
        "topics": 6,
        "partitions": 12,
        "groups": 5,  # four consumer groups and a share group
        "open_transactions": 2,
        "hanging_transactions": 1,
    }


def test_topics_include_sources_and_sinks(state_dir: Path) -> None:
    assert {"orders", "orders-enriched", "payments", "payments-ledger"} <= set(queries.topics())


def test_a_file_locked_by_a_writer_is_unreadable_not_a_crash(state_dir: Path) -> None:
    path = state_dir / "dgm.duckdb"
    os.utime(path, ns=(0, 1))  # a new snapshot key: nothing cached for it
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb,sys,time; c=duckdb.connect(sys.argv[1]); "
         "print('ready', flush=True); time.sleep(60)", str(path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(queries.UnreadableDatabase, match="lock"):
            queries.verdicts()
    finally:
        holder.kill()
        holder.wait()


def test_no_file_is_no_database(tmp_path: Path, use_state_dir: Callable[[Path], None]) -> None:
    use_state_dir(tmp_path)
    with pytest.raises(queries.NoDatabase):
        queries.runs()
