"""The overview's verdict history: one row per pipeline, where its windows' verdict changed."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, pipeline_queries, timerange


def render() -> None:
    st.header("Verdict history", anchor=False)
    within = timerange.current()
    st.caption(f"When each pipeline's achieved semantic changed, {within.label}.")
    st.plotly_chart(
        charts.verdict_timeline(pipeline_queries.verdict_segments(within)), key="history"
    )
