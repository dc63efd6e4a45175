"""The dashboard in a real browser: Debian's Chromium driven by Playwright, served by
`python -m dgm.dashboard_command` (what the `dgm dashboard` console entry runs).

Screenshots go to $DGM_ARTIFACTS (else pytest's tmp dir). With DGM_UPDATE_SCREENSHOTS=1 the
overview and drill-down screenshots are also copied to docs/screenshots/ (not on every run:
they change with every run's timestamps).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api", reason="needs the playwright package")
from playwright.sync_api import Page

from tests.dashboard.conftest import write_config
from tests.dashboard.published import Expected, build

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
WAIT_MS = 90_000

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"needs Debian's Chromium at {CHROMIUM}"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_http(url: str, server: subprocess.Popen[bytes], timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"dgm dashboard exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"{url} did not answer within {timeout_s}s")


@contextmanager
def serving(state_dir: Path, refresh_s: float = 30) -> Iterator[str]:
    """`dgm dashboard` over `state_dir` on a free port; stopped on exit."""
    port = _free_port()
    env = {
        **os.environ,
        "DGM_STATE_DIR": str(state_dir),
        "DGM_CONFIG": str(write_config(state_dir)),
        "DGM_DASHBOARD_REFRESH_S": str(refresh_s),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "dgm.dashboard_command", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_http(url, server)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
def dashboard_url(published: Expected) -> Iterator[str]:
    with serving(published.path.parent) as url:
        yield url


@contextmanager
def chromium() -> Iterator[Page]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            yield browser.new_page(viewport={"width": 1440, "height": 1900})
        finally:
            browser.close()


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    directory = Path(os.environ.get("DGM_ARTIFACTS") or tmp_path) / "dashboard"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _settle(page: Page) -> None:
    """Let Streamlit finish its run and Plotly draw before a screenshot."""
    page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached", timeout=WAIT_MS)
    page.wait_for_timeout(1500)


def test_overview_then_topic_then_pages(
    dashboard_url: str, published: Expected, artifacts: Path
) -> None:
    shots: dict[str, Path] = {}
    with chromium() as page:
        page.goto(dashboard_url, timeout=WAIT_MS)
        for badge in ("MEETS", "VIOLATES", "INSUFFICIENT EVIDENCE"):
            page.get_by_text(badge, exact=True).wait_for(timeout=WAIT_MS)
        assert page.get_by_text("STALE", exact=False).count() == 0
        page.get_by_text("Fresh", exact=True).wait_for(timeout=WAIT_MS)
        _settle(page)
        shots["overview"] = artifacts / "overview.png"
        page.screenshot(path=shots["overview"])

        page.get_by_role("link", name="sink: payments-ledger").click()
        ids = published.duplicated_ids["payments-ledger"]
        page.get_by_text(f"{ids} duplicated ids", exact=False).wait_for(timeout=WAIT_MS)
        assert "topic=payments-ledger" in page.url
        page.set_viewport_size({"width": 1440, "height": 2600})
        _settle(page)
        shots["topic"] = artifacts / "topic.png"
        page.screenshot(path=shots["topic"])

        page.get_by_role("link", name="Transactions & LSO").click()
        page.get_by_text("Open and hanging transactions").wait_for(timeout=WAIT_MS)
        _settle(page)
        page.screenshot(path=artifacts / "transactions.png")

        page.get_by_role("link", name="Consumer groups").click()
        page.get_by_text("Why two lags?", exact=False).wait_for(timeout=WAIT_MS)
        _settle(page)
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
        page.get_by_text("MEETS", exact=True).wait_for(timeout=WAIT_MS)
        page.get_by_text("Fresh", exact=True).wait_for(timeout=WAIT_MS)
        build(tmp_path, finished_ago_s=3600)  # the analysis stopped an hour ago
        page.get_by_text("MEETS (STALE)", exact=True).wait_for(timeout=WAIT_MS)
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
