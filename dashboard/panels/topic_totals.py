"""The topic page's totals over the retention: records, ids, extra copies, aborted records,
records out of order; and whether they are those of a sample."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import queries, ui


def render(topic: str) -> None:
    totals = queries.topic_totals()
    row = totals[totals["topic"] == topic]
    if row.empty:
        return
    r = row.iloc[0]
    cells = st.columns(6)
    cells[0].metric("Committed records", ui.count(r["records"]))
    cells[1].metric("Distinct ids", ui.count(r["distinct_ids"]))
    cells[2].metric("Extra copies", ui.count(r["duplicate_copies"]))
    cells[3].metric("Duplicate rate", ui.rate(r["duplicate_rate"]))
    cells[4].metric("Aborted records", ui.count(r["aborted"]))
    cells[5].metric(
        "Out of order",
        ui.count(r["out_of_order"]),
        help="records behind a higher dgm-seq of their producer session, or (a sink) a "
        "higher source offset of their source partition",
    )
    one_in = _sampled(topic)
    if one_in > 1:
        st.caption(
            f"Sampled: these counts and the records below are those of 1 in {one_in:,} "
            'message ids, kept by their hash (docs/design.md, "Sampled pipelines"); the '
            "pipelines' rates on the overview carry their 95% intervals. Order is not looked "
            "for in a sampled topic."
        )


def _sampled(topic: str) -> int:
    """1 in how many ids the pipelines reading or writing `topic` keep (1: every id)."""
    verdicts = queries.verdicts()
    if "sample_one_in" not in verdicts.columns:  # a publication of an older dgm
        return 1
    shares = [
        int(v["sample_one_in"])
        for _, v in verdicts.iterrows()
        if pd.notna(v["sample_one_in"])
        and topic in [*(v["source_topics"] or []), *(v["sink"] or [])]
    ]
    return max(shares, default=1)
