"""Transactions & LSO: LSO lag over time, stuck LSOs, open and hanging transactions, aborts."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, queries, timerange, ui

TXN_COLUMNS = [
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


def _lso_topic(latest: pd.DataFrame) -> str | None:
    if latest.empty:
        st.info("No offsets samples yet: is `dgm collect` running?")
        return None
    worst = latest.groupby("topic")["lso_lag"].max().sort_values(ascending=False)
    topics = list(worst.index)
    return str(st.selectbox("Topic", topics, index=0, help="ordered by LSO lag, largest first"))


def _stuck(latest: pd.DataFrame) -> None:
    st.subheader("Stuck LSOs", anchor=False)
    stuck = latest[latest["lso_stuck_ms"].fillna(0) > 0]
    if stuck.empty:
        st.success("No partition's LSO is stuck at the newest sample.")
        return
    st.warning(
        f"{len(stuck)} partition(s) have an LSO that has not moved while records sit "
        "above it: read_committed consumers cannot read past it."
    )
    table = stuck.assign(stuck_for=stuck["lso_stuck_ms"].map(ui.duration_ms))
    st.dataframe(
        table[["topic", "partition", "lso", "high_watermark", "lso_lag", "stuck_for"]],
        hide_index=True,
        width="stretch",
    )


def _transactions() -> None:
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
    st.dataframe(table[TXN_COLUMNS], hide_index=True, width="stretch")


def _aborted() -> None:
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


def render() -> None:
    st.title("Transactions & LSO")
    ui.stale_banner()
    st.caption(
        "LSO lag = high watermark - last stable offset. A transaction that stays open "
        "pins the LSO: read_committed consumers stall while lag from the high "
        "watermark looks fine."
    )
    latest = queries.latest_offsets()
    topic = _lso_topic(latest)
    if topic is not None:
        within = timerange.current()
        st.caption(f"LSO lag over {within.label}; the tables below: the newest sample.")
        st.plotly_chart(charts.lso_lag(queries.partition_offsets(topic, within)), key="lso")
    _stuck(latest)
    _transactions()
    _aborted()


ui.run_page(render, "transactions")
