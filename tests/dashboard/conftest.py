"""Fixtures: one published file for the session, and AppTest runs of the dashboard over it."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests.dashboard.published import Expected, build

BADGE = re.compile(r'data-verdict="([^"]*)" data-color="(\w+)"')
APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


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


def write_config(directory: Path, allow_edits: bool = False) -> Path:
    """directory/dgm.toml; `allow_edits` turns the Alerts page's rule form on."""
    config = directory / "dgm.toml"
    config.write_text(
        'state_dir = "."\n[analysis]\ninterval_s = 60\n[collectors]\ninterval_s = 10\n'
        + ("[dashboard]\nallow_edits = true\n" if allow_edits else "")
    )
    return config


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


def page(at: AppTest, name: str, **params: str) -> AppTest:
    """Run the app once, then the page `views/<name>.py` with URL query parameters."""
    at.run()
    at.query_params.update(params)
    return at.switch_page(f"views/{name}.py").run()


def markdown(at: AppTest) -> list[str]:
    return [str(m.value) for m in at.markdown]


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.message for e in at.exception]


def healthy(at: AppTest) -> None:
    """No exception, and no query or config error turned into a message."""
    no_exception(at)
    failed = [e.value for e in at.error if "cannot be read" in e.value or "invalid" in e.value]
    assert not failed, failed


def badges(at: AppTest) -> list[tuple[str, str]]:
    """(color, label) of every badge, in page order."""
    found = (BADGE.search(str(m.value)) for m in at.markdown)
    return [(b[2], b[1]) for b in found if b]
