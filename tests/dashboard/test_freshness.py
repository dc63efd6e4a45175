"""The freshness banner tells the truth: fresh while analyses finish at the pace they can
(their measured cycle plus the interval), "analysis running" while a cycle is under way, STALE
only when the analysis is really behind."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dashboard import ui
from dgm.util.progress import AuditProgress, write_progress
from tests.support.published_world.publish import build

# The test config: analysis every 60 s; build()'s runs take 12 s. Behind past 3 x 72 s.


def test_an_analysis_within_its_pace_is_fresh(
    tmp_path: Path, use_state_dir: Callable[[Path], None]
) -> None:
    build(tmp_path, finished_ago_s=200)  # 3 x 60 s = 180 s would have called this stale
    use_state_dir(tmp_path)
    fresh = ui.freshness()
    assert (fresh.stale, fresh.running) == (False, None)


def test_a_cycle_under_way_says_what_it_does(
    tmp_path: Path, use_state_dir: Callable[[Path], None]
) -> None:
    build(tmp_path, finished_ago_s=100)
    use_state_dir(tmp_path)
    now = datetime.now(UTC)
    progress = AuditProgress("reading", 10, 40, 100, 5.0, 12.0, now, now - timedelta(seconds=2))
    write_progress(tmp_path, progress)
    fresh = ui.freshness()
    assert not fresh.stale
    assert fresh.running is not None
    assert fresh.running.startswith("analysis running: audit reading, 40%; last finished 1")


def test_far_behind_is_stale_even_while_running(
    tmp_path: Path, use_state_dir: Callable[[Path], None]
) -> None:
    build(tmp_path, finished_ago_s=400)
    use_state_dir(tmp_path)
    now = datetime.now(UTC)
    write_progress(tmp_path, AuditProgress("done", 5, 5, 5, 1.0, None, now, now))
    fresh = ui.freshness()
    assert fresh.stale
    assert "one takes about 12 s, every 60 s" in fresh.reasons[0]
    assert "analysis running: analyzing and publishing" in fresh.reasons[0]
