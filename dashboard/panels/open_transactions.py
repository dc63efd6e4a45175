"""The transactions page's open and hanging transactions at the newest sample."""

from __future__ import annotations

import streamlit as st

from dashboard import queries, ui

COLUMNS = [
    "topic",
    "partition",
    "producer_id",
    "producer_epoch",
    "transactional_id",
    "txn_start_offset",
    "age",
    "hanging",
    "hanging_reason",
]


def render() -> None:
    st.subheader("Open and hanging transactions", anchor=False)
    txns = queries.transactions()
    if txns.empty:
        st.success("No open transactions at the newest sample.")
        return
    hanging = int(txns["hanging"].fillna(False).sum())
    left, right = st.columns(2)
    left.metric("Open transactions", len(txns))
    right.metric("Hanging", hanging)
    if hanging:
        st.error(
            f"{hanging} hanging transaction(s): the coordinator will never end them and "
            "they pin the LSO. `kafka-transactions.sh abort` ends one."
        )
    table = txns.assign(age=txns["age_ms"].map(ui.duration_ms))
    st.dataframe(table[COLUMNS], hide_index=True, width="stretch")
