"""The topic page's log integrity: audited offsets read again, a record gone from its offset
(truncated record) or another id there now (inconsistent offset), over the retention."""

from __future__ import annotations

import streamlit as st

from dashboard import queries
from dashboard.panels import record_table
from dgm.contracts.vocabulary import Anomaly

COLUMNS = [
    "anomaly",
    "jepsen",
    "partition",
    "offset",
    "message_id",
    "now_message_id",
    "timestamp",
    "producer",
    "seq",
    "detected_at",
]


def render(topic: str) -> None:
    st.header("Log integrity", anchor=False)
    st.caption(
        "Audited offsets read again: a record gone from the offset it was audited at is a "
        "truncated record (Jepsen: lost-write), an offset holding another id now an "
        "inconsistent offset (Jepsen: inconsistent-offsets). Over the retention."
    )
    frame = queries.log_anomalies(topic)
    if frame.empty:
        st.success("No truncated record and no inconsistent offset found in this topic.")
        return
    counts = frame.groupby("anomaly").size()
    truncated = int(counts.get(Anomaly.TRUNCATED_RECORD.value, 0))
    inconsistent = int(counts.get(Anomaly.INCONSISTENT_OFFSET.value, 0))
    partitions = ", ".join(str(p) for p in sorted(frame["partition"].unique()))
    st.error(
        f"**{truncated} truncated records** and **{inconsistent} inconsistent offsets** in "
        f"partition(s) {partitions}: the log was truncated and its offsets reused (an unclean "
        "leader election, or a broker bug).",
        icon=":material/content_cut:",
    )
    record_table.render(frame[COLUMNS], f"log-anomalies-{topic}.csv", f"anomalies-csv-{topic}")
