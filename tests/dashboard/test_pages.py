"""AppTest runs of every page over the published test file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.dashboard.conftest import badges, healthy, markdown, no_exception, page
from tests.dashboard.published import Expected, build


def test_overview_badges(app: AppTest) -> None:
    at = app.run()
    healthy(at)  # fresh data: no STALE error either
    assert badges(at) == [  # pipelines by name
        ("gray", "INSUFFICIENT EVIDENCE"),
        ("green", "MEETS"),
        ("red", "VIOLATES"),
    ]
    text = markdown(at)
    assert any("weaker evidence" in t and "Untested" in t for t in text)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Hanging transactions"] == "1"
    assert metrics["Open transactions"] == "2"
    assert metrics["Topics"] == "6"


def test_overview_cards_carry_the_pipeline_numbers(app: AppTest) -> None:
    at = app.run()
    by_label: dict[str, list[str]] = {}
    for m in at.metric:
        by_label.setdefault(m.label, []).append(str(m.value))
    # Cards by name: audit-trail, orders-alo, payments-eos.
    assert by_label["Loss rate"] == ["0%", "0%", "0.208%"]
    assert by_label["Aborted reads"] == ["0", "0", "1"]
    assert by_label["LSO lag"][2] == "480"  # the hanging transaction pins payments-ledger


def test_stale_data_never_looks_healthy(
    tmp_path: Path, use_state_dir: Callable[[Path], None]
) -> None:
    build(tmp_path, finished_ago_s=3600)
    use_state_dir(tmp_path)
    at = AppTest.from_file(str(Path(__file__).parents[2] / "dashboard/app.py")).run(timeout=60)
    no_exception(at)
    assert any("STALE" in str(e.value) for e in at.error)
    assert badges(at) == [
        ("gray", "INSUFFICIENT EVIDENCE (STALE)"),
        ("orange", "MEETS (STALE)"),
        ("red", "VIOLATES (STALE)"),
    ]


def test_topic_by_url_lists_every_duplicated_id(app: AppTest, published: Expected) -> None:
    at = page(app, "topic", topic="payments-ledger")
    healthy(at)
    assert at.selectbox[0].value == "payments-ledger"
    ids = published.duplicated_ids["payments-ledger"]
    assert f"**{ids} duplicated ids**, 4 extra copies" in markdown(at)
    table = at.dataframe[0].value
    assert table["message_id"].nunique() == 3
    assert len(table) == 7  # every copy: 2 + 3 + 2
    assert set(table["cause"]) == {"reprocessing", "producer retry"}
    assert "value" not in table.columns and "payload" not in table.columns


def test_topic_filters(app: AppTest) -> None:
    at = page(app, "topic", topic="payments-ledger")
    at.text_input[0].input("pay-0100").run()
    assert "**1 duplicated ids** (of 3), 1 extra copies" in markdown(at)
    assert set(at.dataframe[0].value["message_id"]) == {"pay-0100"}
    at.text_input[0].input("").run()
    at.multiselect[1].select("producer retry").run()  # cause
    assert set(at.dataframe[0].value["message_id"]) == {"pay-0100"}
    at.multiselect[1].unselect("producer retry").run()
    at.multiselect[0].select(1).run()  # partition 1: pay-0042 with all three copies
    table = at.dataframe[0].value
    assert set(table["message_id"]) == {"pay-0042"} and len(table) == 3
    healthy(at)


def test_topic_lost_ids(app: AppTest, published: Expected) -> None:
    at = page(app, "topic", topic="payments")
    healthy(at)
    assert f"**{published.lost_ids['payments']} lost rows**, 5 missing records" in " ".join(
        markdown(at)
    )
    assert len(at.download_button) == 1  # no duplicates in the source topic: only lost's CSV


def test_unknown_topic_in_url_says_so(app: AppTest) -> None:
    at = page(app, "topic", topic="no-such-topic")
    healthy(at)
    assert any("no-such-topic" in str(w.value) for w in at.warning)


def test_transactions_page(app: AppTest) -> None:
    at = page(app, "transactions")
    healthy(at)
    assert at.selectbox[0].value == "payments-ledger"  # largest LSO lag first
    assert {m.label: m.value for m in at.metric}["Hanging"] == "1"
    assert any("hanging transaction" in str(e.value) for e in at.error)
    assert any("LSO that has not moved" in str(w.value) for w in at.warning)
    txns = at.dataframe[1].value
    assert list(txns["producer_id"]) == [3990, 4001]


def test_groups_page_shows_both_lags(app: AppTest) -> None:
    at = page(app, "groups")
    assert at.selectbox[0].value == "ledger-auditor"  # the largest HW - LSO gap comes first
    at.selectbox[0].select("orders-enricher").run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Lag from HW (other tools)"] == metrics["Lag from LSO (transaction-correct)"]
    at.selectbox[0].select("ledger-auditor").run()
    healthy(at)
    lags = {m.label: int(str(m.value).replace(",", "")) for m in at.metric}
    assert lags["Lag from HW (other tools)"] > lags["Lag from LSO (transaction-correct)"]
    assert any("control markers" in t for t in markdown(at))


def test_topic_param_on_the_overview_opens_the_drill_down(app: AppTest) -> None:
    app.query_params["topic"] = "orders-enriched"
    at = app.run()
    healthy(at)
    assert at.title[0].value == "Topic drill-down"
    assert at.selectbox[0].value == "orders-enriched"
