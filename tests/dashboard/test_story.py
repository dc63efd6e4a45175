"""The story of one duplicated id on the topic page, over the built publication."""

from __future__ import annotations

import pandas as pd
from streamlit.testing.v1 import AppTest

from tests.support.dashboard_app import healthy, markdown, page


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
