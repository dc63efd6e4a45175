"""The dashboard under Streamlit's AppTest: its app file, a dgm.toml for it, a page run
with query parameters, and what a run shows (markdown, badges, no exception)."""

from __future__ import annotations

import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

BADGE = re.compile(r'data-verdict="([^"]*)" data-color="(\w+)"')
APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


def write_config(directory: Path, allow_edits: bool = False) -> Path:
    """directory/dgm.toml; `allow_edits` turns the Alerts page's rule form on."""
    config = directory / "dgm.toml"
    config.write_text(
        'state_dir = "."\n[analysis]\ninterval_s = 60\n[collectors]\ninterval_s = 10\n'
        + ("[dashboard]\nallow_edits = true\n" if allow_edits else "")
    )
    return config


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
