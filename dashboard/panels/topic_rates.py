"""The topic page's charts over the time range: duplicate and loss rates per window, and a
heat map of partitions by window."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, queries, timerange


def render(topic: str, within: timerange.TimeRange) -> None:
    st.plotly_chart(
        charts.rates_over_time(
            queries.topic_windows(topic, within), queries.loss_windows(topic, within)
        ),
        key="rates",
    )
    value = st.radio(
        "Heat map of",
        ["duplicate_copies", "aborted", "records"],
        horizontal=True,
        format_func=lambda v: v.replace("_", " "),
    )
    st.plotly_chart(
        charts.partition_heatmap(queries.partition_windows(topic, within), value), key="heatmap"
    )
