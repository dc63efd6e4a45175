"""The overview's "Seen by the watch" panel: duplicates `dgm watch` read seconds ago that no
analysis has published yet (docs/design.md, "The watch"). Refreshed every few seconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import streamlit as st

from dashboard import ui, watch_queries

REFRESH = timedelta(seconds=5)
SILENT_AFTER_S = 60.0  # the watch writes every 5 s: older means it is not running


@st.fragment(run_every=REFRESH if ui.refresh_every() is not None else None)
def render() -> None:
    status, rows, by_pipeline = watch_queries.seen_not_analysed()
    if status is None:
        return  # no watch runs here (disabled, or only external sinks): nothing to say
    age = (datetime.now(UTC) - status.published_at).total_seconds()
    if age > SILENT_AFTER_S:
        st.caption(f"The watch has not written since {ui.when(status.published_at)}.")
    total = sum(by_pipeline.values())
    if total == 0:
        return
    pipelines = ", ".join(f"{name} {n}" for name, n in sorted(by_pipeline.items()))
    st.warning(
        f"**{total} duplicate{'s' if total != 1 else ''} seen by the watch, not yet analysed** "
        f"({pipelines}): extra copies of ids in the sink topics, read seconds ago. The next "
        "analysis publishes them with their cause; a copy the source already held (upstream) "
        "does not count against its pipeline.",
        icon=":material/content_copy:",
    )
    with st.expander("Seen duplicates (newest first)"):
        st.dataframe(rows, hide_index=True)
