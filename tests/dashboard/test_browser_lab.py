"""The operator's pages in Chromium over the publication of a REAL lab run (published_lab:
every mode on the session's broker through SIGKILLs, analyzed by the real `dgm analyze`):
the overview table, a time range chosen in the sidebar that survives a reload, and the story
of one duplicated id."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

pytest.importorskip("playwright.sync_api", reason="needs the playwright package")
from playwright.sync_api import Page, expect

from dashboard.timerange import TimeRange
from tests.support.browser import CHROMIUM, WAIT_MS, chromium, grid_cells, serving, settle
from tests.support.published_lab import BADGES, PublishedLab

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"needs Debian's Chromium at {CHROMIUM}"),
]
EMPTY = "no extra copies in this time range"


@pytest.fixture(scope="module")
def lab_url(published_lab: PublishedLab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One dashboard for the module's tests (each opens its own browser): it only reads."""
    # A dgm.toml of our own (the lab's state dir is only read); an hourly analysis interval
    # keeps the session's snapshot from being (rightly) shown as STALE.
    config = tmp_path_factory.mktemp("lab-dashboard") / "dgm.toml"
    config.write_text('state_dir = "."\n[analysis]\ninterval_s = 3600\n')
    with serving(published_lab.state_dir, config=config) as url:
        yield url


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    directory = Path(os.environ.get("DGM_ARTIFACTS") or tmp_path) / "dashboard-lab"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _pick(page: Page, label: str, option: str) -> None:
    box = page.locator("[data-testid='stSelectbox']").filter(has_text=label)
    box.click()
    page.get_by_role("option", name=option, exact=True).click()


def test_the_overview_table_lists_every_lab_pipeline_with_its_badge(
    lab_url: str, published_lab: PublishedLab, artifacts: Path
) -> None:
    with chromium() as page:
        page.goto(lab_url, timeout=WAIT_MS)
        page.get_by_text("Verdict history").first.wait_for(timeout=WAIT_MS)
        settle(page)
        cells = grid_cells(page, "[data-testid='stDataFrame']")
        page.screenshot(path=artifacts / "overview.png", full_page=True)
    # Columns: pipeline, then its verdict badge.
    shown = {cells[i]: cells[i + 1] for i, c in enumerate(cells[:-1]) if c in _names(published_lab)}
    assert shown == {published_lab.pipeline(run): BADGES[run][1] for run in published_lab.reports}
    first = cells[1]
    assert first == "VIOLATES"  # exactly-once-broken comes first


def _names(lab: PublishedLab) -> set[str]:
    return {lab.pipeline(run) for run in lab.reports}


def test_a_time_range_choice_changes_the_charts_and_survives_a_reload(
    lab_url: str, published_lab: PublishedLab, artifacts: Path
) -> None:
    sink = published_lab.reports["at-least-once"].sink_topic
    assert sink is not None
    a_day_ago = datetime.now(UTC) - timedelta(days=1)
    old = TimeRange("custom", a_day_ago - timedelta(hours=1), a_day_ago).params()
    query = "&".join(f"{k}={v}" for k, v in old.items())
    with chromium() as page:
        page.goto(f"{lab_url}/topic?topic={sink}&{query}", timeout=WAIT_MS)
        page.get_by_text("No duplicated ids in this topic", exact=False).wait_for(timeout=WAIT_MS)
        page.get_by_text(EMPTY).wait_for(timeout=WAIT_MS)  # the by-cause chart is empty
        _pick(page, "Time range", "7 d")
        page.get_by_text("duplicated ids", exact=False).first.wait_for(timeout=WAIT_MS)
        page.wait_for_url("**range=7d**", timeout=WAIT_MS)
        expect(page.get_by_text(EMPTY)).to_have_count(0, timeout=WAIT_MS)  # bars now
        page.reload(timeout=WAIT_MS)
        page.get_by_text("duplicated ids", exact=False).first.wait_for(timeout=WAIT_MS)
        page.get_by_text("Showing last 7 d").wait_for(timeout=WAIT_MS)
        settle(page)
        expect(page.get_by_text(EMPTY)).to_have_count(0, timeout=WAIT_MS)
        assert "range=7d" in page.url and f"topic={sink}" in page.url
        page.screenshot(path=artifacts / "topic-7d.png", full_page=True)
        # Another page keeps the range.
        page.get_by_role("link", name="Transactions & LSO").click()
        page.get_by_text("Showing last 7 d").wait_for(timeout=WAIT_MS)
        page.wait_for_url("**range=7d**", timeout=WAIT_MS)


def test_the_drill_down_of_one_duplicated_id_shows_its_copies_and_cause(
    lab_url: str, published_lab: PublishedLab, artifacts: Path
) -> None:
    sink = published_lab.reports["at-least-once"].sink_topic
    assert sink is not None
    with duckdb.connect(str(published_lab.database), read_only=True) as db:
        message_id, copies, cause = db.execute(
            "SELECT message_id, any_value(copies), any_value(cause) FROM duplicates "
            "WHERE topic = ? GROUP BY message_id ORDER BY message_id LIMIT 1",
            [sink],
        ).fetchall()[0]
        offsets = [
            str(o)
            for (o,) in db.execute(
                'SELECT "offset" FROM duplicates WHERE topic = ? AND message_id = ? '
                "ORDER BY copy_number",
                [sink, message_id],
            ).fetchall()
        ]
    with chromium() as page:
        page.goto(f"{lab_url}/topic?topic={sink}&id={message_id}&range=7d", timeout=WAIT_MS)
        page.get_by_text(f"{copies} copies in {sink}", exact=False).wait_for(timeout=WAIT_MS)
        story = page.locator("[data-testid='stMarkdown']").filter(has_text=f"copies in {sink}")
        assert cause in story.inner_text()
        page.get_by_text("The story of one duplicate").scroll_into_view_if_needed()
        settle(page)
        cells = grid_cells(page, ".st-key-story")
        page.screenshot(path=artifacts / "story.png", full_page=True)
    # Row by row: the copy number, its cause, partition and offset.
    rows = [cells[i : i + 4] for i in range(0, len(cells), len(cells) // copies)]
    assert [r[0] for r in rows] == [str(n) for n in range(1, copies + 1)]
    assert {r[1] for r in rows} == {cause}
    assert [r[3].replace(",", "") for r in rows] == offsets
