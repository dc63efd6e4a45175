"""The Alerts page's history: every firing and resolution, newest first."""

from __future__ import annotations

import streamlit as st

from dashboard import alerting
from dgm.alerting.store import AlertStore

MAX_HISTORY = 500


def render(store: AlertStore) -> None:
    st.header("History", anchor=False)
    entries = store.history(MAX_HISTORY)
    if not entries:
        st.caption("No rule has fired yet.")
        return
    st.caption(f"Every firing and resolution, newest first (the last {MAX_HISTORY} at most).")
    st.dataframe(alerting.history_table(entries), hide_index=True, width="stretch")
