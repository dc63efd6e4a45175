"""The freshness panel shows the audit's progress from the file `dgm analyze` writes, even
before anything is published (a first audit of a large backlog)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from streamlit.testing.v1 import AppTest

from dgm.util.progress import AuditProgress, read_progress, write_progress
from tests.support.dashboard_app import APP, no_exception

NOW = datetime.now(UTC)


def captions(state_dir: Path) -> list[str]:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    no_exception(at)
    return [str(c.value) for c in at.sidebar.caption]


def test_a_running_audit_shows_records_rate_and_eta(
    tmp_path: Path, use_state_dir: Callable[[Path], None]
) -> None:
    use_state_dir(tmp_path)
    assert not any("Audit" in c for c in captions(tmp_path))  # no file: no line
    running = AuditProgress(
        "reading", 399_500, 400_000, 1_000_000, 38_000.0, 15.8, NOW - timedelta(seconds=11), NOW
    )
    write_progress(tmp_path, running)
    assert read_progress(tmp_path) == running
    (line,) = [c for c in captions(tmp_path) if "Audit" in c]
    assert line.startswith(
        "Audit reading: 399,500 records, 400,000 of 1,000,000 offsets (40%), "
        "38,000 records/s, ETA 16 s (updated "
    )


def test_a_finished_audit_says_how_much_and_when(
    tmp_path: Path, use_state_dir: Callable[[Path], None]
) -> None:
    use_state_dir(tmp_path)
    now = datetime.now(UTC)
    done = AuditProgress("done", 50, 50, 50, 12.5, 0.0, now, now - timedelta(minutes=5))
    write_progress(tmp_path, done)
    (line,) = [c for c in captions(tmp_path) if "audit" in c.lower()]
    assert line.startswith("Last audit done: 50 records at 12 records/s (5.")
    assert line.endswith(" min ago)")
