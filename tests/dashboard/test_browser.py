"""The dashboard in a real browser: Debian's Chromium driven by Playwright, served by
`python -m shell.dashboard_command` (what the `dgm dashboard` console entry runs).

Screenshots go to $DGM_ARTIFACTS (else pytest's tmp dir). With DGM_UPDATE_SCREENSHOTS=1 the
overview and drill-down screenshots are also copied to docs/screenshots/ (not on every run:
they change with every run's timestamps).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api", reason="needs the playwright package")
from tests.support.browser import CHROMIUM, WAIT_MS, chromium, serving, settle, wait_cell
from tests.support.published_world.publish import Expected, build

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"needs Debian's Chromium at {CHROMIUM}"),
]


@pytest.fixture(scope="module")
def _serving_published(_publications: dict[str, Any]) -> Iterator[str]:
    """One dashboard over the session's hand-made publication for the module's tests (each
    opens its own browser): it reads the file anew when `published` builds it again."""
    with serving(_publications["directory"]) as url:
        yield url


@pytest.fixture
def dashboard_url(published: Expected, _serving_published: str) -> str:
    return _serving_published


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    directory = Path(os.environ.get("DGM_ARTIFACTS") or tmp_path) / "dashboard"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def test_overview_then_topic_then_pages(
    dashboard_url: str, published: Expected, artifacts: Path
) -> None:
    shots: dict[str, Path] = {}
    with chromium() as page:
        page.goto(dashboard_url, timeout=WAIT_MS)
        for badge in ("MEETS", "VIOLATES", "INSUFFICIENT EVIDENCE"):  # the table's cells
            wait_cell(page, badge)
        page.get_by_text("VIOLATES", exact=True).last.wait_for(timeout=WAIT_MS)  # the card's
        assert page.get_by_text("STALE", exact=False).count() == 0
        page.get_by_text("Fresh", exact=True).wait_for(timeout=WAIT_MS)
        settle(page)
        shots["overview"] = artifacts / "overview.png"
        page.screenshot(path=shots["overview"])

        page.get_by_role("link", name="sink: payments-ledger").click()
        ids = published.duplicated_ids["payments-ledger"]
        page.get_by_text(f"{ids} duplicated ids", exact=False).wait_for(timeout=WAIT_MS)
        assert "topic=payments-ledger" in page.url
        page.set_viewport_size({"width": 1440, "height": 2600})
        settle(page)
        shots["topic"] = artifacts / "topic.png"
        page.screenshot(path=shots["topic"])

        page.get_by_role("link", name="Transactions & LSO").click()
        page.get_by_text("Open and hanging transactions").wait_for(timeout=WAIT_MS)
        settle(page)
        page.screenshot(path=artifacts / "transactions.png")

        page.get_by_role("link", name="Consumer groups").click()
        page.get_by_text("Why two lags?", exact=False).wait_for(timeout=WAIT_MS)
        settle(page)
        page.screenshot(path=artifacts / "groups.png")
    if os.environ.get("DGM_UPDATE_SCREENSHOTS") == "1":
        docs = REPO / "docs" / "screenshots"
        docs.mkdir(parents=True, exist_ok=True)
        for name, shot in shots.items():
            shutil.copyfile(shot, docs / f"{name}.png")


def test_a_new_publication_shows_without_a_reload(tmp_path: Path) -> None:
    """Auto-refresh and the mtime cache key: a run published meanwhile reaches the open page."""
    build(tmp_path)
    with serving(tmp_path, refresh_s=1) as url, chromium() as page:
        page.goto(url, timeout=WAIT_MS)
        wait_cell(page, "MEETS")
        page.get_by_text("Fresh", exact=True).wait_for(timeout=WAIT_MS)
        build(tmp_path, finished_ago_s=3600)  # the analysis stopped an hour ago
        wait_cell(page, "MEETS (STALE)")
        page.get_by_text("STALE DATA", exact=False).first.wait_for(timeout=WAIT_MS)
        assert page.get_by_text("MEETS", exact=True).count() == 0


def test_a_shared_topic_link_is_the_first_request(published: Expected) -> None:
    """A fresh server whose first visitor opens `/topic?topic=NAME` gets the whole app."""
    ids = published.duplicated_ids["payments-ledger"]
    with serving(published.path.parent) as url, chromium() as page:
        page.goto(f"{url}/topic?topic=payments-ledger", timeout=WAIT_MS)
        page.get_by_text(f"{ids} duplicated ids", exact=False).wait_for(timeout=WAIT_MS)
        page.get_by_text("Data freshness").wait_for(timeout=WAIT_MS)  # app.py ran too
        page.get_by_role("link", name="Transactions & LSO").wait_for(timeout=WAIT_MS)


def test_order_torn_commits_and_truncations_show_in_the_browser(
    dashboard_url: str, artifacts: Path
) -> None:
    """The anomalies beside duplicates and losses, as a user meets them: the overview's
    columns and the pipeline's card, then each topic page's Order and Log integrity sections
    (the hand-made publication: tests/support/published_world/)."""
    with chromium() as page:
        page.goto(f"{dashboard_url}/?pipeline=payments-eos", timeout=WAIT_MS)
        wait_cell(page, "Torn commits")  # the table's column (those right of it scroll)
        card = (
            "1 of the lost records are torn commits",
            "2 source records behind a higher dgm-seq of their producer session",
            "1 sink records behind a higher offset of their source partition",
            "2 truncated records (Jepsen: lost-write) and 1 inconsistent offsets",
        )
        for said in card:
            page.get_by_text(said, exact=False).first.wait_for(timeout=WAIT_MS)  # the card
        settle(page)
        page.screenshot(path=artifacts / "overview-anomalies.png")

        page.goto(f"{dashboard_url}/topic?topic=payments", timeout=WAIT_MS)
        page.get_by_text("out of order: 2 records", exact=False).wait_for(timeout=WAIT_MS)
        page.goto(f"{dashboard_url}/topic?topic=payments-ledger", timeout=WAIT_MS)
        page.get_by_text("sink out of order: 1 records", exact=False).wait_for(timeout=WAIT_MS)
        page.get_by_text("2 truncated records", exact=False).wait_for(timeout=WAIT_MS)
        page.get_by_text("1 inconsistent offsets", exact=False).first.wait_for(timeout=WAIT_MS)
        wait_cell(page, "lost-write")  # each anomaly listed with its Jepsen name
        settle(page)
        page.screenshot(path=artifacts / "topic-anomalies.png")
