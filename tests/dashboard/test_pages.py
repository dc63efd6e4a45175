"""AppTest runs of every page over the published test file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
from streamlit.testing.v1 import AppTest

from dashboard.pipeline_queries import why_not_judged
from dashboard.ui import duration_ms
from tests.support.dashboard_app import badges, healthy, markdown, no_exception, page
from tests.support.published_world.publish import Expected, build


def _table(at: AppTest) -> pd.DataFrame:
    frame: pd.DataFrame = at.dataframe[0].value
    return frame


def _select(at: AppTest, label: str) -> Any:
    return next(s for s in at.selectbox if s.label == label)


def test_overview_table_lists_every_pipeline_violating_first(app: AppTest) -> None:
    at = app.run()
    healthy(at)  # fresh data: no STALE error either
    table = _table(at)
    assert list(zip(table["pipeline"], table["verdict"], strict=True)) == [
        ("payments-eos", "VIOLATES"),
        ("audit-trail", "INSUFFICIENT EVIDENCE"),
        ("orders-alo", "MEETS"),
    ]
    assert list(table["lso_lag"]) == [480, 0, 0]  # the hanging transaction pins the ledger
    assert list(table["evidence"]) == ["tested", "untested", "tested"]
    assert list(table["group_status"]) == ["OK", "OK", "OK"]  # each one's consumer group
    # Each window's verdict has been the same since the first window.
    assert table["holds_since"].iloc[0] == table["holds_since"].iloc[2]
    assert table["why_not_judged"].iloc[1] == (
        "only 40 records checked, fewer than min_records = 100"
    )
    # The first row's details: its badge and its card.
    assert badges(at) == [("red", "VIOLATES")]
    assert any("weaker evidence" not in t and "Tested" in t for t in markdown(at))
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Hanging transactions"] == "1"
    assert metrics["Open transactions"] == "2"
    assert metrics["Topics"] == "6"
    assert at.query_params["pipeline"] == "payments-eos"


def test_overview_shows_the_producer_stage_without_a_click(app: AppTest) -> None:
    at = app.run()
    table = _table(at).set_index("pipeline")
    # orders-alo's producer retried into its source: shown in the table itself, beside the
    # copy step's own verdict; pipelines without a stages row show nothing there.
    assert table.loc["orders-alo", "producer_achieved"] == "at-least-once"
    assert table.loc["orders-alo", "producer_duplicate_rate"] == 0.01
    assert table.loc["orders-alo", "end_to_end_achieved"] == "at-least-once"
    assert table["producer_achieved"].isna().sum() == 2
    at.query_params["pipeline"] = "orders-alo"
    _select(at, "Details of").select("orders-alo").run()
    assert any("Producer stage" in t and "1.00% extra copies" in t for t in markdown(at))


def test_a_pipelines_card_lists_its_slowest_late_records(app: AppTest) -> None:
    at = app.run()
    at.query_params["pipeline"] = "orders-alo"
    _select(at, "Details of").select("orders-alo").run()
    assert any("Slowest late records" in t and "2 delivered later" in t for t in markdown(at))
    (late,) = [d.value for d in at.dataframe if "delay_s" in d.value]
    assert late["message_id"].tolist() == ["ord-0043", "ord-0042"]  # slowest first
    assert late["first_copy"].tolist() == ["orders-enriched/0/44", "orders-enriched/1/40"]
    assert late["source_record"].tolist() == ["orders/0/43", "orders/0/42"]


def test_overview_shows_the_delivery_latency_and_the_cause_mix(app: AppTest) -> None:
    at = app.run()
    table = _table(at).set_index("pipeline")
    assert table.loc["orders-alo", "latency_p99_s"] == 4.0
    assert table.loc["payments-eos", "duplicate_causes"]  # its extra copies, by cause
    at.query_params["pipeline"] = "orders-alo"
    _select(at, "Details of").select("orders-alo").run()
    told = [t for t in markdown(at) if "Delivery latency" in t]
    assert told and "p50 0.5 s" in told[0] and "p99 4 s" in told[0], told
    assert "max 8 s" in told[0]
    assert "4,800 records" in told[0]


def test_overview_filters_in_the_table(app: AppTest) -> None:
    at = app.run()
    at.toggle(key="overview-violating").set_value(True).run()
    assert list(_table(at)["pipeline"]) == ["payments-eos"]
    at.toggle(key="overview-violating").set_value(False).run()
    at.text_input(key="overview-filter").input("ORDERS").run()  # a source topic, any case
    assert list(_table(at)["pipeline"]) == ["orders-alo"]
    at.text_input(key="overview-filter").input("audit-copier").run()  # a consumer group
    assert list(_table(at)["pipeline"]) == ["audit-trail"]
    assert badges(at) == [("gray", "INSUFFICIENT EVIDENCE")]
    assert any("Untested" in t and "weaker evidence" in t for t in markdown(at))
    healthy(at)


def test_overview_details_follow_the_url(app: AppTest) -> None:
    app.query_params["pipeline"] = "orders-alo"
    at = app.run()
    healthy(at)
    assert _select(at, "Details of").value == "orders-alo"
    assert badges(at) == [("green", "MEETS")]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Loss rate"] == "0%" and metrics["Aborted reads"] == "0"
    # orders-alo keeps 1 in 10 ids: its rates come with their 95% intervals.
    said = " ".join(markdown(at))
    assert "**Sampled**: the counts are those of 1 in 10 message ids" in said
    assert "duplicate rate 0.011% to 0.152%, loss rate 0% to 0.080%" in said
    _select(at, "Details of").select("payments-eos").run()
    assert at.query_params["pipeline"] == "payments-eos"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Loss rate"] == "0.208%" and metrics["LSO lag"] == "480"  # every id
    assert not any("**Sampled**" in t for t in markdown(at))


def test_unjudged_counts_say_why() -> None:
    """ "records 0 · duplicates 4" never comes alone: the reason is given."""
    row = pd.Series(
        {"records_checked": 0, "duplicate_copies": 4, "consumer_group": "g", "group_commits": 0}
    )
    assert why_not_judged(row, 30, 100).startswith("no commit of group g sampled yet")
    row["group_commits"] = 5
    assert why_not_judged(row, 30, 100).startswith("pending grace")
    assert "grace_s = 30 s" in why_not_judged(row, 30, 100)
    row["records_checked"], row["achieved"] = 500, "at-least-once"
    assert why_not_judged(row, 30, 100) == ""
    row["beyond_retention"] = 991
    assert why_not_judged(row, 30, 100).startswith("991 source records missing from the sink")


def test_verdict_history_is_a_timeline(app: AppTest) -> None:
    at = app.run()
    history = json.loads(at.get("plotly_chart")[-1].proto.spec)
    traces = {t["name"]: t for t in history["data"]}
    assert set(traces) == {"no guarantee", "insufficient evidence", "at-least-once"}
    assert traces["no guarantee"]["y"] == ["payments-eos"]


def test_stale_data_never_looks_healthy(
    tmp_path: Path, use_state_dir: Callable[[Path], None]
) -> None:
    build(tmp_path, finished_ago_s=3600)
    use_state_dir(tmp_path)
    at = AppTest.from_file(str(Path(__file__).parents[2] / "dashboard/app.py")).run(timeout=60)
    no_exception(at)
    assert any("STALE" in str(e.value) for e in at.error)
    assert list(at.dataframe[0].value["verdict"]) == [
        "VIOLATES (STALE)",
        "INSUFFICIENT EVIDENCE (STALE)",
        "MEETS (STALE)",
    ]
    at.query_params["pipeline"] = "orders-alo"
    at = at.run()
    assert badges(at) == [("orange", "MEETS (STALE)")]


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
    assert not any("Sampled" in str(c.value) for c in at.caption)  # payments keeps every id


def test_a_sampled_topic_says_so(app: AppTest) -> None:
    at = page(app, "topic", topic="orders-enriched")  # orders-alo's sink: 1 in 10 ids
    healthy(at)
    said = " ".join(str(c.value) for c in at.caption)
    assert "Sampled: these counts and the records below are those of 1 in 10 message ids" in said


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
    # No duplicates in the source topic: lost's CSV, and the records out of order's.
    assert len(at.download_button) == 2


def _order_table(at: AppTest) -> pd.DataFrame:
    """The topic page's Order table (the one with the higher position before each record)."""
    return next(d.value for d in at.dataframe if "preceded_by" in d.value.columns)


def test_topic_lists_its_records_out_of_order(app: AppTest) -> None:
    at = page(app, "topic", topic="payments")
    healthy(at)
    assert "out of order: **2 records**" in markdown(at)
    assert {m.label: m.value for m in at.metric}["Out of order"] == "2"
    table = _order_table(at)
    assert list(table["offset"]) == [205, 206] and set(table["preceded_at"]) == {204}
    assert list(table["position"]) == [201, 202] and set(table["preceded_by"]) == {204}
    at = page(app, "topic", topic="payments-ledger")
    assert "sink out of order: **1 records**" in markdown(at)
    row = _order_table(at).iloc[0]
    assert (row["stream"], row["pipeline"], row["preceded_at"]) == (
        "payments/1",
        "payments-eos",
        88,
    )
    at = page(app, "topic", topic="orders")
    assert any("No record out of order" in str(s.value) for s in at.success)


def test_overview_shows_torn_commits_and_order(app: AppTest) -> None:
    at = app.run()
    table = _table(at).set_index("pipeline")
    shown = table.loc[
        "payments-eos", ["torn_commits", "producer_out_of_order", "sink_out_of_order"]
    ]
    assert list(shown) == [1, 2, 1]
    assert list(table.loc["orders-alo", ["torn_commits", "sink_out_of_order"]]) == [0, 0]
    card = " ".join(markdown(at))  # payments-eos's card, the first row's
    assert "**1** of the lost records are torn commits" in card
    assert "**2** source records behind a higher dgm-seq" in card


def test_topic_log_integrity(app: AppTest) -> None:
    at = page(app, "topic", topic="payments-ledger")
    healthy(at)
    errors = [e.value for e in at.error]
    assert any("**2 truncated records** and **1 inconsistent offsets**" in e for e in errors)
    anomalies = at.dataframe[-1].value
    assert sorted(zip(anomalies["anomaly"], anomalies["offset"], strict=True)) == [
        ("inconsistent offset", 120),
        ("truncated record", 120),
        ("truncated record", 121),
    ]
    assert set(anomalies["jepsen"]) == {"lost-write", "inconsistent-offsets"}
    at = page(app, "topic", topic="orders")
    assert "No truncated record and no inconsistent offset found in this topic." in [
        s.value for s in at.success
    ]


def test_overview_shows_log_integrity(app: AppTest) -> None:
    app.query_params["pipeline"] = "payments-eos"
    at = app.run()
    healthy(at)
    table = _table(at)
    assert (
        dict(zip(table["pipeline"], table["truncated_records"], strict=True))["payments-eos"] == 2
    )
    assert any("**Log integrity**: 2 truncated records" in e.value for e in at.error)


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
    lags = {
        m.label: int(str(m.value).replace(",", ""))
        for m in at.metric
        if m.label.startswith("Lag from")
    }
    assert lags["Lag from HW (other tools)"] > lags["Lag from LSO (transaction-correct)"]
    assert any("control markers" in t for t in markdown(at))


def test_groups_page_shows_lag_in_seconds_and_the_catch_up(
    app: AppTest, published: Expected
) -> None:
    at = page(app, "groups")
    at.selectbox[0].select("orders-enricher").run()
    healthy(at)
    metrics = {m.label: str(m.value) for m in at.metric}
    with duckdb.connect(str(published.path), read_only=True) as db:
        lag_row = db.execute(
            "SELECT lag_s, lag_s_resolution FROM latest_group_lag "
            "WHERE group_id = 'orders-enricher' ORDER BY lag_s DESC LIMIT 1"
        ).fetchone()
        pace_row = db.execute(
            "SELECT catching_up, catch_up_s FROM group_status_by_group "
            "WHERE group_id = 'orders-enricher'"
        ).fetchone()
    assert lag_row is not None and pace_row is not None
    (oldest, resolution), (catching_up, catch_up_s) = lag_row, pace_row
    # The world's consumer trails by 15-24 records at 40 records per 30 s sample.
    assert 0 < oldest < 60 and resolution == 30
    shown = metrics["Lag in seconds (oldest record not committed)"]
    assert shown == f"{oldest:.0f} s (± 30 s)"
    expected = (
        "keeping up"
        if catch_up_s is None
        else "caught up"
        if catch_up_s == 0
        else f"catching up in ~{duration_ms(catch_up_s * 1000)}"
    )
    assert metrics["Catch-up estimate"] == (expected if catching_up else "not catching up")


def test_topic_param_on_the_overview_opens_the_drill_down(app: AppTest) -> None:
    app.query_params["topic"] = "orders-enriched"
    at = app.run()
    healthy(at)
    assert at.title[0].value == "Topic drill-down"
    assert at.selectbox[0].value == "orders-enriched"
