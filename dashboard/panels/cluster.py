"""The overview's cluster: topics, partitions, groups and transactions at the newest sample,
and a warning when hanging transactions pin the LSO."""

from __future__ import annotations

import streamlit as st

from dashboard import queries

_CELLS = (
    ("Topics", "topics"),
    ("Partitions", "partitions"),
    ("Consumer groups", "groups"),
    ("Open transactions", "open_transactions"),
    ("Hanging transactions", "hanging_transactions"),
)


def render() -> None:
    st.header("Cluster", anchor=False)
    summary = queries.cluster_summary()
    for cell, (label, key) in zip(st.columns(len(_CELLS)), _CELLS, strict=True):
        cell.metric(label, summary[key])
    if summary["hanging_transactions"]:
        st.warning(
            f"{summary['hanging_transactions']} hanging transaction(s) pin the LSO: "
            "read_committed consumers stall. See Transactions & LSO.",
            icon=":material/lock_clock:",
        )
