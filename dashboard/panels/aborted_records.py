"""The transactions page's aborted records per topic, over the fingerprint retention."""

from __future__ import annotations

import streamlit as st

from dashboard import queries


def render() -> None:
    st.subheader("Aborted records per topic", anchor=False)
    totals = queries.topic_totals()
    if totals.empty:
        st.info("No topic totals published yet.")
        return
    st.caption(
        "Records of aborted transactions stay in the log (only read_committed consumers "
        "skip them); totals over the fingerprint retention."
    )
    st.dataframe(totals[["topic", "records", "aborted"]], hide_index=True, width="stretch")
