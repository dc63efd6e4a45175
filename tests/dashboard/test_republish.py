"""The dashboard keeps serving while the analysis republishes every second.

The analysis is `dgm analyze`'s own loop (AnalysisJob.run_forever at a 1 s interval: audit,
analyze, publish by atomic rename, alerts) on the session's Spark, over a copy of the
session's lab run (tests/support/published_lab.py); the browser reloads the overview over and over
meanwhile. Every reload must show every pipeline, a badge and no error, and the reloads must
see several publications. (A `dgm analyze` subprocess would spend its first minutes starting
a second JVM and warming it up; the CLI around the loop is tested in test_analyze_crash.)
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api", reason="needs the playwright package")
from dgm.config.loader import load_config
from spark_jobs.job import AnalysisJob
from tests.support.browser import CHROMIUM, WAIT_MS, chromium, grid_cells, serving
from tests.support.published_lab import PublishedLab
from tests.support.strength import by_strength

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"needs Debian's Chromium at {CHROMIUM}"),
]

RELOADS = by_strength(4, 20)  # DGM_LONG=1: twenty
PUBLICATIONS = by_strength(2, 3)  # distinct analysis runs the reloads must have shown
DEADLINE_S = 900
LAST_ANALYSIS = re.compile(r"Last analysis: (\S+ \S+) UTC")


@pytest.fixture
def republishing(
    published_lab: PublishedLab, kafka: Any, spark: Any, tmp_path: Path
) -> Iterator[Path]:
    """A copy of the lab's state, republished every second until the end of the test."""
    # The whole lab folder: its dgm.toml names the idempotent sink's file relative to itself.
    source = published_lab.config.source
    assert source is not None
    root = tmp_path / "lab-copy"
    shutil.copytree(source.parent, root)
    config_path = root / source.name
    config_path.write_text(config_path.read_text().replace(str(source.parent), str(root)))
    config = load_config(config_path)
    config = replace(config, analysis=replace(config.analysis, interval_s=1.0))
    said: list[str] = []
    job = AnalysisJob(config, kafka.bootstrap_servers, spark=spark, progress=said.append)
    stop = threading.Event()
    loop = threading.Thread(target=job.run_forever, args=(stop,), name="analyze", daemon=True)
    loop.start()
    try:
        yield config.state_dir
    finally:
        stop.set()
        loop.join(600)
    assert not loop.is_alive(), "the analysis loop did not stop"
    failed = [line for line in said if "failed" in line]
    assert not failed, failed
    published = [line for line in said if line.startswith("analysis ")]  # a run's summary
    assert len(published) >= PUBLICATIONS - 1, said


def test_reloads_while_analyze_republishes_show_no_error(
    republishing: Path, published_lab: PublishedLab
) -> None:
    names = {published_lab.pipeline(run) for run in published_lab.reports}
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
            page.locator("[data-verdict]").first.wait_for(timeout=WAIT_MS)  # the card's badge
            assert names <= set(grid_cells(page))  # and every pipeline in the table
            assert page.locator('[data-testid="stException"]').count() == 0
            assert page.get_by_text("cannot be read", exact=False).count() == 0
            found = LAST_ANALYSIS.search(sidebar.inner_text())
            assert found, sidebar.inner_text()
            seen.append(found[1])
    assert len(seen) >= RELOADS and len(set(seen)) >= PUBLICATIONS
