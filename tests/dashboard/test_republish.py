"""The dashboard keeps serving while a real `dgm analyze` republishes every second.

The analysis runs over a copy of the session's lab publication (tests/published_lab.py) with
its own Spark; the browser reloads the overview over and over meanwhile. Every reload must
show the pipelines' badges and no error, and the reloads must see several publications.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api", reason="needs the playwright package")
from tests.dashboard.browser import CHROMIUM, WAIT_MS, chromium, serving
from tests.published_lab import PublishedLab

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"needs Debian's Chromium at {CHROMIUM}"),
]

RELOADS = 20
PUBLICATIONS = 3  # distinct analysis runs the reloads must have shown
DEADLINE_S = 900
LAST_ANALYSIS = re.compile(r"Last analysis: (\S+ \S+) UTC")


@pytest.fixture
def republishing(published_lab: PublishedLab, kafka: Any, tmp_path: Path) -> Iterator[Path]:
    """A copy of the lab's state, republished by `dgm analyze --interval 1` until the end."""
    # The whole lab folder: its dgm.toml names the idempotent sink's file relative to itself.
    source = published_lab.config.source
    assert source is not None
    root = tmp_path / "lab-copy"
    shutil.copytree(source.parent, root)
    config = root / source.name
    config.write_text(config.read_text().replace(str(source.parent), str(root)))
    state_dir = root / published_lab.state_dir.relative_to(source.parent)
    bootstrap = kafka.bootstrap_servers
    command = [sys.executable, "-m", "dgm.cli", "--config", str(config), "analyze"]
    command += ["--interval", "1", "--bootstrap", bootstrap]
    log = (tmp_path / "analyze.log").open("w")
    analysis = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "DGM_SPARK_MASTER": "local[1]"},
    )
    try:
        yield state_dir
        assert analysis.poll() is None, (tmp_path / "analyze.log").read_text()[-3000:]
    finally:
        analysis.terminate()
        try:
            analysis.wait(60)
        except subprocess.TimeoutExpired:
            analysis.kill()
            analysis.wait(30)
        log.close()


def test_twenty_reloads_while_analyze_republishes_show_no_error(
    republishing: Path, published_lab: PublishedLab
) -> None:
    pipelines = len(published_lab.reports)
    seen: list[str] = []
    deadline = time.monotonic() + DEADLINE_S
    with serving(republishing, refresh_s=1) as url, chromium() as page:
        while len(seen) < RELOADS or len(set(seen)) < PUBLICATIONS:
            assert time.monotonic() < deadline, (
                f"{len(seen)} reloads saw {len(set(seen))} publications in {DEADLINE_S}s"
            )
            page.goto(url, timeout=WAIT_MS)
            sidebar = page.get_by_text("Last analysis:", exact=False)
            sidebar.wait_for(timeout=WAIT_MS)
            page.locator("[data-verdict]").nth(pipelines - 1).wait_for(timeout=WAIT_MS)
            assert page.locator('[data-testid="stException"]').count() == 0
            assert page.get_by_text("cannot be read", exact=False).count() == 0
            found = LAST_ANALYSIS.search(sidebar.inner_text())
            assert found, sidebar.inner_text()
            seen.append(found[1])
    assert len(seen) >= RELOADS and len(set(seen)) >= PUBLICATIONS
