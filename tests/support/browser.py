"""Serving the dashboard and driving Debian's Chromium, for the tests that use a real browser."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Page

from dgm.util.ports import free_ports
from dgm.util.waiting import wait_until
from shell.stack import dashboard_answers
from tests.support.dashboard_app import write_config

CHROMIUM = Path("/usr/bin/chromium")
WAIT_MS = 90_000


def _wait_http(url: str, server: subprocess.Popen[bytes], timeout_s: float = 90) -> None:
    def answers() -> bool:
        if server.poll() is not None:
            raise AssertionError(f"dgm dashboard exited with {server.returncode}")
        return dashboard_answers(url)

    wait_until(answers, timeout_s, f"{url} to answer", interval=0.3)


@contextmanager
def serving(
    state_dir: Path, refresh_s: float = 30, config: Path | None = None, allow_edits: bool = False
) -> Iterator[str]:
    """`dgm dashboard` over `state_dir` on a free port; stopped on exit. Its dgm.toml is
    `config`, else one written into `state_dir` (`allow_edits` turning the rule form on)."""
    (port,) = free_ports(1)
    env = {
        **os.environ,
        "DGM_STATE_DIR": str(state_dir),
        "DGM_CONFIG": str(config or write_config(state_dir, allow_edits)),
        "DGM_DASHBOARD_REFRESH_S": str(refresh_s),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "shell.dashboard_command", "--port", str(port)],
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


# Each Plotly chart Streamlit shows draws into its own SVG once its figure arrived.
PLOTS_DRAWN = """() => Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"]'))
    .every(chart => chart.querySelector('svg.main-svg') !== null)"""


def settle(page: Page) -> None:
    """Until Streamlit has finished its run and Plotly has drawn every chart (a screenshot
    then shows the page as a user sees it)."""
    page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached", timeout=WAIT_MS)
    page.wait_for_function(PLOTS_DRAWN, timeout=WAIT_MS)


def grid_cells(page: Page, scope: str = "[data-testid='stDataFrame']") -> list[str]:
    """The text of a dataframe's rendered cells, row by row: Glide draws on a canvas, and its
    accessible grid behind it (hidden to Playwright, but attached) holds the text."""
    cells = page.locator(f"{scope} [role='gridcell']")
    cells.first.wait_for(state="attached", timeout=WAIT_MS)
    return [cells.nth(i).inner_text() for i in range(cells.count())]


def wait_cell(page: Page, text: str) -> None:
    """Until some text, a dataframe's cell included (attached, not visible: see grid_cells),
    reads exactly `text`."""
    page.get_by_text(text, exact=True).first.wait_for(state="attached", timeout=WAIT_MS)
