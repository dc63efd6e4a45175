"""Topic drill-down (shareable: `?topic=NAME&id=ID`): rates and duplicates by cause over the
time range, heat map, duplicates, the story of one duplicated id, lost ids, records out of
order, and the log's integrity (truncated records, inconsistent offsets).

Only ids, keys and record coordinates are shown: the published tables hold no payloads.
"""

from __future__ import annotations

import streamlit as st

from dashboard import queries, timerange, ui
from dashboard.panels import (
    log_integrity,
    topic_duplicates,
    topic_lost,
    topic_order,
    topic_rates,
    topic_totals,
)


def render() -> None:
    st.title("Topic drill-down")
    ui.stale_banner()
    topic = ui.pick_or_say(
        "Topic", queries.topics(), "topic", none="The published tables name no topic yet."
    )
    if topic is None:
        return
    topic_totals.render(topic)
    within = timerange.current()
    st.caption(f"Totals over the fingerprint retention; charts and tables: {within.label}.")
    topic_rates.render(topic, within)
    topic_duplicates.render(topic, within)
    topic_lost.render(topic, within)
    topic_order.render(topic, within)
    log_integrity.render(topic)


ui.run_page(render, "topic")
