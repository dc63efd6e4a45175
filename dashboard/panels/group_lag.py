"""The groups page's lag: from the high watermark next to from the LSO, at the newest sample
and over the time range, and why the two differ."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, queries, timerange, ui

WHY = """**Why two lags?** Lag from the high watermark (HW - committed) is what other tools show.
On transactional topics it counts records a read_committed consumer cannot or will not read:
transaction control markers (each takes an offset), records of aborted transactions, and
records of transactions still open. Lag from the LSO (LSO - committed) is what the consumer
can actually still read. A large HW lag with a small LSO lag usually means an open or hanging
transaction pins the LSO (see Transactions & LSO)."""


def render(group: str, latest: pd.DataFrame) -> None:
    """`latest`: the group's lag rows at the newest sample."""
    left, right = st.columns(2)
    left.metric("Lag from HW (other tools)", ui.count(latest["lag_from_hw"].sum()))
    right.metric("Lag from LSO (transaction-correct)", ui.count(latest["lag_from_lso"].sum()))
    st.plotly_chart(charts.lag_both_ways(latest), key="lag-both")
    st.markdown(WHY)
    within = timerange.current()  # the over-time views; the metrics above: the newest sample
    st.caption(f"Lag over time and faults: {within.label}.")
    st.plotly_chart(charts.lag_over_time(queries.group_lag(group, within)), key="lag-time")
