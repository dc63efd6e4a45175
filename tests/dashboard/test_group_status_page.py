"""The groups page's status over the published test file: a badge per group, the partitions'
statuses, and the line that says an open transaction pins the LSO."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.support.dashboard_app import healthy, markdown, page


def _pinned(at: AppTest) -> list[str]:
    return [str(i.value) for i in at.info if "An open transaction pins the LSO" in str(i.value)]


def test_a_consumer_caught_up_to_a_pinned_lso_is_ok_not_stalled(app: AppTest) -> None:
    at = page(app, "groups")
    at.selectbox[0].select("ledger-auditor").run()
    healthy(at)
    assert any('data-status="OK"' in text for text in markdown(at))
    table = next(d.value for d in at.dataframe if "status_from_hw" in d.value.columns)
    # Partition 1 sits at the LSO the hanging transaction pins: lag 0 from the LSO, growing
    # from the high watermark, so HW lag would call it STALL.
    assert list(table["status"]) == ["OK", "OK"]
    assert list(table["status_from_hw"]) == ["OK", "STALL"]
    (note,) = _pinned(at)
    assert "not stalled (by lag from the HW it would look STALL)" in note


def test_no_pinned_lso_line_where_both_lags_agree(app: AppTest) -> None:
    at = page(app, "groups")
    at.selectbox[0].select("orders-enricher").run()
    healthy(at)
    assert any('data-status="OK"' in text for text in markdown(at))
    assert _pinned(at) == []


def test_the_url_names_the_group_shown(app: AppTest) -> None:
    # An alert's link (/groups?group=NAME) opens that group, not the first one.
    at = page(app, "groups", group="orders-enricher")
    healthy(at)
    assert at.selectbox[0].value == "orders-enricher"
    assert at.query_params["group"] == "orders-enricher"
    at.selectbox[0].select("ledger-auditor").run()  # and a choice goes back into the URL
    assert at.query_params["group"] == "ledger-auditor"


def test_a_share_group_lists_its_share_partitions(app: AppTest) -> None:
    """orders-queue's start offsets trail 30-34 records; the broker counts 3 or 4 of them not
    acknowledged: the rest were acknowledged above the start (the hand-made samples)."""
    at = page(app, "groups", group="orders-queue")
    healthy(at)
    assert any("A **share group**" in str(i.value) for i in at.info)
    table = next(d.value for d in at.dataframe if "share lag" in d.value.columns)
    assert list(table["partition"]) == [0, 1, 2]
    assert (table["end"] - table["start offset"] == table["above start"]).all()
    assert (table["above start"] - table["share lag"] == table["acknowledged above start"]).all()
    assert set(table["share lag"]) <= {3, 4} and (table["above start"] >= 30).all()
    assert list(table["redelivered copies"]) == [0, 0, 0]  # no pipeline of it
