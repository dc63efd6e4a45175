"""The topic page's duplicates: extra copies per window by cause, every copy of every
duplicated id in the range (filtered, CSV), and the story of one of them."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, queries, timerange
from dashboard.panels import duplicate_story, record_table

COLUMNS = [
    "message_id",
    "copy_number",
    "copies",
    *duplicate_story.COPY,
    "evidence",
    "producer_id",
    "producer_epoch",
    "lineage",
    "source_partition",
    "source_offset",
    "pipeline",
]


def render(topic: str, within: timerange.TimeRange) -> None:
    st.header("Duplicates", anchor=False)
    st.plotly_chart(
        charts.duplicates_by_cause(queries.duplicates_by_cause(topic, within)), key="by-cause"
    )
    frame = queries.duplicates(topic, within)
    if frame.empty:
        st.success(f"No duplicated ids in this topic, {within.label}.")
        return
    mask = record_table.matching(frame, f"dup-{topic}", "Message id or key contains")
    # A match on any copy shows the id with every copy.
    ids = frame.loc[mask, "message_id"].unique()
    shown = frame[frame["message_id"].isin(ids)]
    total = frame["message_id"].nunique()
    extra = int(shown["is_extra_copy"].sum())
    of = "" if len(ids) == total else f" (of {total})"
    st.markdown(f"**{len(ids)} duplicated ids**{of}, {extra} extra copies")
    by_cause = shown[shown["is_extra_copy"]].groupby("cause").size()
    if not by_cause.empty:
        st.caption("Extra copies by cause: " + ", ".join(f"{c}: {n}" for c, n in by_cause.items()))
    record_table.render(shown[COLUMNS], f"duplicates-{topic}.csv", f"dup-csv-{topic}")
    duplicate_story.render(topic, [str(i) for i in ids])
