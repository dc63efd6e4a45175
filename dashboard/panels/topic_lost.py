"""The topic page's lost ids: of the pipelines reading or writing the topic, at their source
coordinates (filtered, CSV)."""

from __future__ import annotations

import streamlit as st

from dashboard import queries, timerange
from dashboard.panels import record_table

COLUMNS = [
    "message_id",
    "cause",
    "partition",
    "offset",
    "timestamp",
    "producer",
    "seq",
    "missing",
    "pipeline",
]


def render(topic: str, within: timerange.TimeRange) -> None:
    st.header("Lost", anchor=False)
    st.caption(
        "Ids of the pipelines that read or write this topic, at their source coordinates "
        f"({within.label}; sequence gaps, which have no time, always)."
    )
    frame = queries.lost(topic, within)
    if frame.empty:
        st.success("No lost ids read from this topic or by a pipeline writing it.")
        return
    shown = frame[record_table.matching(frame, f"lost-{topic}", "Message id contains")]
    missing = int(shown["missing"].fillna(1).sum())
    st.markdown(
        f"**{len(shown)} lost rows**, {missing} missing records (a sequence gap counts its length)"
    )
    record_table.render(shown[COLUMNS], f"lost-{topic}.csv", f"lost-csv-{topic}")
