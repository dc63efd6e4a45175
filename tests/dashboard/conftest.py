"""Fixtures: one published file for the session, and AppTest runs of the dashboard over it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.dashboard_app import APP, write_config
from tests.support.published_world.publish import Expected, build

# Well inside the 3 x 72 s after which the dashboard rightly calls build()'s file STALE.
FRESH_FOR_S = 60.0


@pytest.fixture(scope="session")
def _publications(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return {"directory": tmp_path_factory.mktemp("published"), "built_at": None}


@pytest.fixture
def published(_publications: dict[str, Any]) -> Expected:
    """The session's hand-made publication, published again once it is FRESH_FOR_S old: the
    dashboard tests that use it span minutes on a loaded machine, and a file built at the
    start would turn STALE under the later ones."""
    built_at = _publications["built_at"]
    if built_at is None or time.monotonic() - built_at > FRESH_FOR_S:
        _publications["expected"] = build(_publications["directory"])
        _publications["built_at"] = time.monotonic()
    expected: Expected = _publications["expected"]
    return expected


@pytest.fixture
def use_state_dir(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Point the dashboard at a state directory (its own dgm.toml there, no auto-refresh;
    `allow_edits=True` turns the Alerts page's rule form on)."""

    def point(state_dir: Path, allow_edits: bool = False) -> None:
        monkeypatch.setenv("DGM_CONFIG", str(write_config(state_dir, allow_edits)))
        monkeypatch.setenv("DGM_STATE_DIR", str(state_dir))
        monkeypatch.setenv("DGM_DASHBOARD_REFRESH_S", "0")

    return point


@pytest.fixture
def app(published: Expected, use_state_dir: Callable[[Path], None]) -> Iterator[AppTest]:
    use_state_dir(published.path.parent)
    yield AppTest.from_file(str(APP), default_timeout=60)
