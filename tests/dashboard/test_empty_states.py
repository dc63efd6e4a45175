"""No file, a corrupt file, a file of other tables: a message and a Retry button, no traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from tests.support.dashboard_app import APP, badges, no_exception

PAGES = ["overview", "topic", "transactions", "groups"]


def _run(name: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    if name != "overview":
        at.switch_page(f"views/{name}.py").run()
    no_exception(at)
    return at


@pytest.mark.parametrize("name", PAGES)
def test_no_database_says_what_to_run(
    name: str, tmp_path: Path, use_state_dir: Callable[[Path], None]
) -> None:
    use_state_dir(tmp_path)
    at = _run(name)
    message = " ".join(str(i.value) for i in at.info)
    assert "dgm collect" in message and "dgm analyze" in message and "dgm demo" in message
    assert [b.label for b in at.button] == ["Retry"]


def test_corrupt_file_is_a_message(tmp_path: Path, use_state_dir: Callable[[Path], None]) -> None:
    (tmp_path / "dgm.duckdb").write_bytes(b"not a database" * 1000)
    use_state_dir(tmp_path)
    for name in PAGES:
        at = _run(name)
        assert any("cannot be read" in str(e.value) for e in at.error), name
        assert "Retry" in [b.label for b in at.button]


def test_file_without_the_tables_is_a_message(
    tmp_path: Path, use_state_dir: Callable[[Path], None]
) -> None:
    duckdb.connect(str(tmp_path / "dgm.duckdb")).close()
    use_state_dir(tmp_path)
    at = _run("overview")
    assert any("this version of `dgm analyze`" in str(e.value) for e in at.error)


def test_retry_reads_a_file_published_meanwhile(
    tmp_path: Path, use_state_dir: Callable[[Path], None]
) -> None:
    from tests.support.published_world.publish import recent_copy

    use_state_dir(tmp_path)
    at = _run("overview")
    recent_copy(tmp_path)
    at.button[0].click().run()
    no_exception(at)
    assert ("red", "VIOLATES") in badges(at)
