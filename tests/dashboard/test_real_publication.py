"""Every page over a real `dgm analyze` publication, when one is named.

DGM_DASHBOARD_STATE_DIR=<state dir holding dgm.duckdb> runs it (for example a lab run's);
otherwise it is skipped. The built test file (published.py) checks the numbers; this checks
that real output renders without a query error or an exception.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.dashboard.conftest import APP, healthy

STATE_DIR = os.environ.get("DGM_DASHBOARD_STATE_DIR")


@pytest.mark.skipif(not STATE_DIR, reason="set DGM_DASHBOARD_STATE_DIR to a real state dir")
@pytest.mark.parametrize("name", ["overview", "topic", "transactions", "groups"])
def test_every_page_renders_a_real_publication(
    name: str,
    use_state_dir: Callable[[Path], None],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert STATE_DIR is not None
    real = Path(STATE_DIR)
    assert (real / "dgm.duckdb").is_file(), f"no dgm.duckdb in {real}"
    use_state_dir(tmp_path)  # a dgm.toml of our own: the real dir is only read
    monkeypatch.setenv("DGM_STATE_DIR", str(real))
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    if name != "overview":
        at.switch_page(f"views/{name}.py").run()
    healthy(at)
