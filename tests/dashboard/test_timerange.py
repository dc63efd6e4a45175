"""The time range: parsed from the URL (pure), kept in it, and applied by the pages' queries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from streamlit.testing.v1 import AppTest

from dashboard.timerange import TimeRange, minute_ceiling, parse
from tests.support.dashboard_app import healthy, markdown, page

NOW = datetime(2026, 11, 23, 8, 30, 15, tzinfo=UTC)


def test_relative_ranges_end_at_the_next_minute() -> None:
    chosen, problem = parse({"range": "15m"}, NOW)
    assert problem is None
    assert chosen.end == datetime(2026, 11, 23, 8, 31, tzinfo=UTC)
    assert chosen.end - chosen.start == timedelta(minutes=15)
    assert minute_ceiling(chosen.end) == chosen.end
    assert parse({}, NOW)[0].choice == "24h"  # the default
    assert parse({"range": "7d"}, NOW)[0].label == "last 7 d"


def test_a_custom_range_round_trips_through_the_url() -> None:
    wanted = TimeRange("custom", NOW - timedelta(hours=2), NOW - timedelta(hours=1))
    params = wanted.params()
    assert params == {
        "range": "custom",
        "from": "2026-11-23T06:30:15Z",
        "to": "2026-11-23T07:30:15Z",
    }
    assert parse(params, NOW) == (wanted, None)


def test_a_bad_range_says_why_and_falls_back() -> None:
    chosen, problem = parse({"range": "fortnight"}, NOW)
    assert chosen.choice == "24h" and problem is not None and "fortnight" in problem
    _, problem = parse({"range": "custom", "from": "2026-11-23T09:00:00Z"}, NOW)
    assert problem is not None and "`from` and `to`" in problem
    backwards = {"range": "custom", "from": "2026-11-23T09:00:00Z", "to": "2026-11-23T08:00:00Z"}
    _, problem = parse(backwards, NOW)
    assert problem is not None and "after it ends" in problem


def _custom(hours_ago: float, hours: float) -> dict[str, str]:
    end = datetime.now(UTC) - timedelta(hours=hours_ago)
    return TimeRange("custom", end - timedelta(hours=hours), end).params()


def test_the_range_filters_the_topic_page(app: AppTest) -> None:
    at = page(app, "topic", topic="payments-ledger", **_custom(hours_ago=2, hours=1))
    healthy(at)
    assert any("No duplicated ids in this topic" in str(s.value) for s in at.success)
    assert not any("duplicated ids**" in t for t in markdown(at))
    # The charts say the range holds nothing.
    specs = [str(c.proto.spec) for c in at.get("plotly_chart")]
    assert any("no extra copies in this time range" in s for s in specs)
    at.query_params["range"] = "1h"
    at = at.run()
    assert "**3 duplicated ids**, 4 extra copies" in markdown(at)
    assert at.query_params["range"] == "1h"


def test_the_sidebar_choice_goes_into_the_url_and_stays_across_pages(app: AppTest) -> None:
    at = app.run()
    assert at.query_params["range"] == "24h"  # the URL always says which range it shows
    picker = next(s for s in at.selectbox if s.label == "Time range")
    picker.select("15m").run()
    assert at.query_params["range"] == "15m"
    at = at.switch_page("views/transactions.py").run()
    assert at.query_params["range"] == "15m"
    assert any("last 15 min" in str(c.value) for c in at.caption)
    picker = next(s for s in at.selectbox if s.label == "Time range")
    picker.select("custom").run()
    assert at.query_params["range"] == "custom"
    assert {"from", "to"} <= set(at.query_params)
    healthy(at)


def test_a_bad_range_in_the_url_is_a_warning(app: AppTest) -> None:
    app.query_params["range"] = "fortnight"
    at = app.run()
    assert any("fortnight" in str(w.value) for w in at.warning)
    assert any("last 24 h" in str(c.value) for c in at.caption)
