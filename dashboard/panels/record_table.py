"""A table of records on the topic page: filters over it, the first MAX_ROWS shown, and a CSV
download of every row."""

from __future__ import annotations

import pandas as pd
import streamlit as st

MAX_ROWS = 5000  # shown in the table; the CSV download has every row


def matching(frame: pd.DataFrame, key: str, text_label: str) -> pd.Series:
    """Row mask from the filter widgets: text (id or key), partitions, causes."""
    left, middle, right = st.columns([2, 1, 2])
    text = left.text_input(text_label, key=f"{key}-text").strip()
    partitions = middle.multiselect(
        "Partition", sorted(frame["partition"].dropna().unique()), key=f"{key}-partition"
    )
    causes = right.multiselect(
        "Cause", sorted(frame["cause"].dropna().unique()), key=f"{key}-cause"
    )
    mask = pd.Series(True, index=frame.index)
    if text:
        fields = ["message_id", "key"] if "key" in frame else ["message_id"]
        hits = [frame[f].fillna("").str.contains(text, case=False, regex=False) for f in fields]
        mask &= pd.concat(hits, axis=1).any(axis=1)
    if partitions:
        mask &= frame["partition"].isin(partitions)
    if causes:
        mask &= frame["cause"].isin(causes)
    return mask


def render(frame: pd.DataFrame, file_name: str, key: str) -> None:
    """The rows (the first MAX_ROWS), then a button downloading them all as `file_name`."""
    if len(frame) > MAX_ROWS:
        st.caption(f"Showing the first {MAX_ROWS:,} of {len(frame):,} rows; the CSV has them all.")
    st.dataframe(frame.head(MAX_ROWS), hide_index=True, width="stretch")
    st.download_button(
        f"Download {file_name} (CSV)",
        frame.to_csv(index=False).encode(),
        file_name=file_name,
        mime="text/csv",
        key=key,
        icon=":material/download:",
    )
