"""The transactions page's LSO lag over the time range, of one topic (the worst first)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, queries, timerange


def render(latest: pd.DataFrame) -> None:
    """`latest`: partition_offsets at the newest sample, to order the topics by."""
    topic = _topic(latest)
    if topic is not None:
        within = timerange.current()
        st.caption(f"LSO lag over {within.label}; the tables below: the newest sample.")
        st.plotly_chart(charts.lso_lag(queries.partition_offsets(topic, within)), key="lso")


def _topic(latest: pd.DataFrame) -> str | None:
    if latest.empty:
        st.info("No offsets samples yet: is `dgm collect` running?")
        return None
    worst = latest.groupby("topic")["lso_lag"].max().sort_values(ascending=False)
    topics = list(worst.index)
    return str(st.selectbox("Topic", topics, index=0, help="ordered by LSO lag, largest first"))
