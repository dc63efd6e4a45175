"""The story of one duplicated id on the topic page, over the built publication."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from tests.support.dashboard_app import APP, healthy, markdown, page
from tests.support.published_world.publish import Expected


def _story(at: AppTest) -> pd.DataFrame:
    frame: pd.DataFrame = next(
        d for d in at.dataframe if "transaction_state" in d.value.columns
    ).value
    return frame


def test_the_story_of_an_id_in_the_url(app: AppTest) -> None:
    at = page(app, "topic", topic="payments-ledger", id="pay-0042")
    healthy(at)
    assert next(s for s in at.selectbox if s.label == "Duplicated id").value == "pay-0042"
    story = _story(at)
    assert list(story["copy_number"]) == [1, 2, 3]
    assert list(story["partition"]) == [1, 1, 1] and list(story["offset"]) == [60, 71, 88]
    assert set(story["cause"]) == {"reprocessing"}
    assert list(story["producer"]) == ["proc-a", "proc-b", "proc-b"]
    assert list(story["seq"]) == [42, 5, 11]
    assert set(story["transaction_state"]) == {"committed"}
    # The group's commit on the source partition of each copy's lineage, and a fault.
    assert all(
        c.startswith("group payments-processor on payments/1") for c in story["group_commit"]
    )
    assert all(f != "no fault observed" for f in story["nearest_fault"])
    narrative = next(t for t in markdown(at) if "`pay-0042`" in t)
    assert "3 copies in payments-ledger" in narrative and "reprocessing" in narrative
    assert "value" not in story.columns and "payload" not in story.columns


def test_picking_another_id_goes_into_the_url(app: AppTest) -> None:
    at = page(app, "topic", topic="payments-ledger")
    picker = next(s for s in at.selectbox if s.label == "Duplicated id")
    assert picker.value == "pay-0007"  # the first id shown
    picker.select("pay-0100").run()
    assert at.query_params["id"] == "pay-0100"
    story = _story(at)
    assert set(story["cause"]) == {"producer retry"}
    assert list(story["seq"]) == [100, 100]  # the same producer sequence twice: a retry
    healthy(at)


def test_an_id_that_is_no_duplicate_says_so(app: AppTest) -> None:
    at = page(app, "topic", topic="payments-ledger", id="pay-9999")
    healthy(at)
    assert any(
        "pay-9999" in str(i.value) and "not a duplicated id" in str(i.value) for i in at.info
    )


def test_values_are_read_only_on_a_press_and_a_pipeline_can_hide_them(
    published: Expected, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing answers at this address: pressing reads, and says it could not.
    config = tmp_path / "dgm.toml"
    written = (
        f'state_dir = "{published.path.parent}"\n[cluster]\nbootstrap_servers = "127.0.0.1:9"\n'
    )
    config.write_text(written)
    monkeypatch.setenv("DGM_CONFIG", str(config))
    monkeypatch.setenv("DGM_STATE_DIR", str(published.path.parent))
    monkeypatch.setenv("DGM_DASHBOARD_REFRESH_S", "0")
    at = page(
        AppTest.from_file(str(APP), default_timeout=60),
        "topic",
        topic="payments-ledger",
        id="pay-0042",
    )
    read = next(b for b in at.button if b.label == "Read these copies' values from Kafka")
    assert not at.warning  # not read before the press
    read.click().run(timeout=60)
    assert any("Could not read payments-ledger" in str(w.value) for w in at.warning), at.warning
    # A pipeline of the topic hides them: no button, said why.
    config.write_text(
        written + '[[pipelines]]\nname = "ledger"\nsource_topics = ["payments"]\n'
        'sink_topics = ["payments-ledger"]\nconsumer_group = "g"\n'
        'declared_semantic = "at-least-once"\nhide_values = true\n'
    )
    at = page(
        AppTest.from_file(str(APP), default_timeout=60),
        "topic",
        topic="payments-ledger",
        id="pay-0042",
    )
    assert not [b for b in at.button if b.label.startswith("Read these copies")]
    assert any("pipeline ledger sets hide_values" in str(c.value) for c in at.caption)
