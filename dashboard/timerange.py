"""The time range every page shows (sidebar), kept in the URL: `?range=1h`, or
`?range=custom&from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z`.

Relative ranges end at the current minute, rounded up: queries are cached by their
parameters, so an end that moved every second would never hit the cache. Pages pass the
range to dashboard.queries, which filter by it in SQL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

import streamlit as st

RELATIVE = {
    "15m": ("15 min", timedelta(minutes=15)),
    "1h": ("1 h", timedelta(hours=1)),
    "6h": ("6 h", timedelta(hours=6)),
    "24h": ("24 h", timedelta(hours=24)),
    "7d": ("7 d", timedelta(days=7)),
}
CUSTOM = "custom"
CHOICES = (*RELATIVE, CUSTOM)
DEFAULT = "24h"
PARAMS = ("range", "from", "to")
_KEY = "time-range"
_REMEMBERED = "time-range-params"  # the last range, restored when navigation drops the URL's


@dataclass(frozen=True)
class TimeRange:
    """[start, end) in UTC; `choice` is one of CHOICES."""

    choice: str
    start: datetime
    end: datetime

    @property
    def label(self) -> str:
        if self.choice in RELATIVE:
            return f"last {RELATIVE[self.choice][0]}"
        return f"{self.start:%Y-%m-%d %H:%M} to {self.end:%Y-%m-%d %H:%M} UTC"

    def params(self) -> dict[str, str]:
        if self.choice != CUSTOM:
            return {"range": self.choice}
        return {"range": CUSTOM, "from": stamp(self.start), "to": stamp(self.end)}


def stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _instant(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def minute_ceiling(now: datetime) -> datetime:
    floor = now.astimezone(UTC).replace(second=0, microsecond=0)
    return floor if floor == now else floor + timedelta(minutes=1)


def parse(params: Mapping[str, str], now: datetime) -> tuple[TimeRange, str | None]:
    """The range the URL asks for, and a problem with it (then the default range is used)."""
    choice = params.get("range") or DEFAULT
    end = minute_ceiling(now)
    if choice in RELATIVE:
        return TimeRange(choice, end - RELATIVE[choice][1], end), None
    fallback = TimeRange(DEFAULT, end - RELATIVE[DEFAULT][1], end)
    if choice != CUSTOM:
        return fallback, f"unknown range {choice!r} (expected one of {', '.join(CHOICES)})"
    start, stop = _instant(params.get("from")), _instant(params.get("to"))
    if start is None or stop is None:
        return fallback, "a custom range needs `from` and `to` as ISO 8601 UTC times"
    if start >= stop:
        return fallback, f"the custom range starts ({stamp(start)}) after it ends ({stamp(stop)})"
    return TimeRange(CUSTOM, start, stop), None


def current() -> TimeRange:
    """The range of this run (the URL's; the sidebar keeps it there)."""
    chosen, _ = parse(_url(), datetime.now(UTC))
    return chosen


def _url() -> dict[str, str]:
    return {k: st.query_params[k] for k in PARAMS if k in st.query_params}


def _write(params: Mapping[str, str]) -> None:
    for key in PARAMS:
        if key not in params and key in st.query_params:
            del st.query_params[key]
    st.query_params.update(params)
    st.session_state[_REMEMBERED] = dict(params)


def _choose() -> None:
    choice = st.session_state[_KEY]
    if choice != CUSTOM:
        _write({"range": choice})
        return
    # A custom range starts as the range shown until now; the date and time inputs refine it.
    shown, _ = parse(st.session_state.get(_REMEMBERED, {}), datetime.now(UTC))
    _write(TimeRange(CUSTOM, shown.start, shown.end).params())


def _custom_edge(edge: str) -> None:
    day = st.session_state[f"{_KEY}-{edge}-date"]
    clock = st.session_state[f"{_KEY}-{edge}-time"]
    moment = datetime.combine(day, clock, tzinfo=UTC)
    params = dict(_url())
    params[edge] = stamp(moment)
    _write(params)


def sidebar() -> TimeRange:
    """The range picker; call once per run, before the page (app.py)."""
    if "range" not in st.query_params and _REMEMBERED in st.session_state:
        st.query_params.update(st.session_state[_REMEMBERED])  # a page switch dropped it
    chosen, problem = parse(_url(), datetime.now(UTC))
    if not problem and "range" not in st.query_params:
        st.query_params.update(chosen.params())  # the URL always says which range it shows
    st.session_state[_REMEMBERED] = chosen.params()
    st.session_state[_KEY] = chosen.choice  # the URL wins (a link, a reload, back/forward)
    st.selectbox(
        "Time range",
        CHOICES,
        key=_KEY,
        format_func=lambda c: RELATIVE[c][0] if c in RELATIVE else "custom…",
        on_change=_choose,
        help="What every chart and table of the pages shows; kept in the URL.",
    )
    if problem:
        st.warning(f"Time range in the URL ignored: {problem}.", icon=":material/warning:")
    if chosen.choice == CUSTOM:
        for edge, label, moment in (("from", "From", chosen.start), ("to", "To", chosen.end)):
            day, clock = st.columns(2)
            st.session_state[f"{_KEY}-{edge}-date"] = moment.date()
            st.session_state[f"{_KEY}-{edge}-time"] = time(moment.hour, moment.minute)
            day.date_input(
                f"{label} (UTC)", key=f"{_KEY}-{edge}-date", on_change=_custom_edge, args=(edge,)
            )
            clock.time_input(
                f"{label} time",
                key=f"{_KEY}-{edge}-time",
                on_change=_custom_edge,
                args=(edge,),
                step=60,
            )
    st.caption(f"Showing {chosen.label}")
    return chosen
