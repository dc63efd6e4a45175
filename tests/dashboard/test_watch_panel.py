"""The overview's panel of duplicates seen by the watch: only those no analysis published."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

from dgm.contracts.watched import WatchStatus
from tests.support.dashboard_app import APP, healthy, page
from tests.support.published_world.publish import recent_copy
from watch.publish import publish


def seen(message_id: str, partition: int, offset: int) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "pipeline": "orders-alo",
        "topic": "orders-enriched",
        "message_id": message_id,
        "partition": partition,
        "offset": offset,
        "timestamp": now - timedelta(seconds=2),
        "first_partition": partition,
        "first_offset": offset - 5,
        "first_timestamp": now - timedelta(seconds=9),
        "seen_at": now - timedelta(seconds=1),
        "cluster": "default",
    }


def status(published_ago_s: float) -> WatchStatus:
    now = datetime.now(UTC)
    return WatchStatus(now - timedelta(hours=1), now - timedelta(seconds=published_ago_s))


def overview(state_dir: Path, use_state_dir: Callable[[Path], None]) -> AppTest:
    use_state_dir(state_dir)
    at = page(AppTest.from_file(str(APP), default_timeout=60), "overview")
    healthy(at)
    return at


def test_only_the_seen_duplicates_no_analysis_published_are_shown(
    tmp_path: Path, use_state_dir: Callable[[Path], None]
) -> None:
    recent_copy(tmp_path)
    # (0, 131) is an extra copy the analysis published already; (1, 900) is new.
    publish(tmp_path, [seen("ord-0012", 0, 131), seen("ord-0500", 1, 900)], status(2))
    at = overview(tmp_path, use_state_dir)
    (warning,) = [w.value for w in at.warning if "seen by the watch" in w.value]
    assert warning.startswith("**1 duplicate seen by the watch, not yet analysed** (orders-alo 1)")
    (table,) = [d.value for d in at.dataframe if "seen_at" in d.value.columns]
    assert table["message_id"].tolist() == ["ord-0500"]


def test_without_a_watch_file_or_new_duplicates_the_panel_says_nothing(
    tmp_path: Path, use_state_dir: Callable[[Path], None]
) -> None:
    recent_copy(tmp_path)
    at = overview(tmp_path, use_state_dir)
    assert not [w for w in at.warning if "watch" in w.value]
    publish(tmp_path, [seen("ord-0012", 0, 131)], status(2))
    at = overview(tmp_path, use_state_dir)
    assert not [w for w in at.warning if "watch" in w.value]
    assert not [c for c in at.caption if "watch has not written" in c.value]


def test_a_watch_that_stopped_writing_is_said(
    tmp_path: Path, use_state_dir: Callable[[Path], None]
) -> None:
    recent_copy(tmp_path)
    publish(tmp_path, [], status(600))
    at = overview(tmp_path, use_state_dir)
    assert [c for c in at.caption if "The watch has not written since" in c.value]
