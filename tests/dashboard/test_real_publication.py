"""Every page over the publication of a real lab run (tests/support/published_lab.py: every
mode on the session's broker through SIGKILLs, collected and analyzed by the real
`dgm analyze`).

The hand-made file (tests/support/published_world/) pins exact numbers of a hand-made
publication; this checks the pages against what a real run published, read back from the
same DuckDB file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from tests.support.dashboard_app import APP, badges, healthy, markdown
from tests.support.published_lab import BADGES, PublishedLab


@pytest.fixture
def real_app(
    published_lab: PublishedLab,
    use_state_dir: Callable[[Path], None],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AppTest:
    use_state_dir(tmp_path)  # a dgm.toml of our own: the lab's state dir is only read
    # The publication is a snapshot taken once per session, minutes before some of these
    # tests run: an hourly analysis interval keeps it from being (rightly) shown as STALE.
    (tmp_path / "dgm.toml").write_text('state_dir = "."\n[analysis]\ninterval_s = 3600\n')
    monkeypatch.setenv("DGM_STATE_DIR", str(published_lab.state_dir))
    return AppTest.from_file(str(APP), default_timeout=120)


def test_overview_shows_every_lab_pipeline_with_its_badge(
    real_app: AppTest, published_lab: PublishedLab
) -> None:
    at = real_app.run()
    healthy(at)
    table = at.dataframe[0].value
    shown = dict(zip(table["pipeline"], table["verdict"], strict=True))
    assert shown == {published_lab.pipeline(run): BADGES[run][1] for run in published_lab.reports}
    # Violating pipelines first; the first row's card carries the same badge.
    assert list(table["verdict"]) == sorted(table["verdict"], key=lambda v: v != "VIOLATES")
    assert [label for _, label in badges(at)] == [table["verdict"][0]]
    assert [h.value for h in at.subheader] == [table["pipeline"][0]]


def test_drill_down_lists_the_at_least_once_duplicates(
    real_app: AppTest, published_lab: PublishedLab
) -> None:
    sink = published_lab.reports["at-least-once"].sink_topic
    assert sink is not None
    with duckdb.connect(str(published_lab.database), read_only=True) as db:
        ids, copies = db.execute(
            "SELECT count(DISTINCT message_id), count(*) FROM duplicates WHERE topic = ?", [sink]
        ).fetchall()[0]
    assert ids > 0
    at = real_app.run()
    at.query_params["topic"] = sink
    at = at.switch_page("views/topic.py").run()
    healthy(at)
    assert any(f"**{ids} duplicated ids**" in m for m in markdown(at))
    table = at.dataframe[0].value
    assert table["message_id"].nunique() == ids and len(table) == copies
    assert set(table["cause"]) == {"reprocessing"}


@pytest.mark.parametrize("name", ["transactions", "groups", "alerts"])
def test_other_pages_render_the_real_publication(real_app: AppTest, name: str) -> None:
    at = real_app.run()
    at = at.switch_page(f"views/{name}.py").run()
    healthy(at)
