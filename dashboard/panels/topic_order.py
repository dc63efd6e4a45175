"""The topic page's records out of order: behind a higher position of their stream, a
producer session's dgm-seq or a sink's source offsets (CSV). Beside the verdict, never part
of it."""

from __future__ import annotations

import streamlit as st

from dashboard import queries, timerange
from dashboard.panels import record_table
from dgm.contracts.vocabulary import OrderAnomaly

COLUMNS = [
    "anomaly",
    "partition",
    "offset",
    "timestamp",
    "message_id",
    "stream",
    "position",
    "preceded_by",
    "preceded_at",
    "pipeline",
]


def render(topic: str, within: timerange.TimeRange) -> None:
    st.header("Order", anchor=False)
    st.caption(
        f"Records behind a higher position of their stream ({within.label}): "
        f"**{OrderAnomaly.OUT_OF_ORDER}**, a producer session's dgm-seq (position) fell "
        f"within a partition; **{OrderAnomaly.SINK_OUT_OF_ORDER}**, a sink's copies of one "
        "source partition (stream) fell back in source offset. `preceded_by` is the highest "
        "position before the record, at offset `preceded_at`. Order is judged beside the "
        "verdict, never part of it."
    )
    frame = queries.out_of_order(topic, within)
    if frame.empty:
        st.success(f"No record out of order in this topic, {within.label}.")
        return
    by_anomaly = frame.drop_duplicates(["anomaly", "partition", "offset"]).groupby("anomaly")
    st.markdown(
        ", ".join(f"{anomaly}: **{n} records**" for anomaly, n in by_anomaly.size().items())
    )
    record_table.render(frame[COLUMNS], f"out-of-order-{topic}.csv", f"order-csv-{topic}")
