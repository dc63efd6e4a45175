"""Transactions & LSO: LSO lag over time, stuck LSOs, open and hanging transactions, aborts."""

from __future__ import annotations

import streamlit as st

from dashboard import queries, ui
from dashboard.panels import aborted_records, lso_lag, open_transactions, stuck_lsos


def render() -> None:
    st.title("Transactions & LSO")
    ui.stale_banner()
    st.caption(
        "LSO lag = high watermark - last stable offset. A transaction that stays open "
        "pins the LSO: read_committed consumers stall while lag from the high "
        "watermark looks fine."
    )
    latest = queries.latest_offsets()
    lso_lag.render(latest)
    stuck_lsos.render(latest)
    open_transactions.render()
    aborted_records.render()


ui.run_page(render, "transactions")
