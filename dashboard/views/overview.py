"""Overview: what dgm is refused and what the watch saw, every pipeline in one sortable table
(violating first), the details of the one selected (kept in the URL: `?pipeline=NAME`), the
verdict history and the cluster; each a panel of dashboard/panels/."""

from __future__ import annotations

import streamlit as st

from dashboard import page_paths, ui
from dashboard.panels import (
    cluster,
    missing_capabilities,
    missing_permissions,
    pipeline_card,
    pipelines_table,
    seen_duplicates,
    verdict_history,
)


def render() -> None:
    if "topic" in st.query_params:  # a shared `/?topic=NAME` link means the drill-down
        st.switch_page(page_paths.TOPIC, query_params={"topic": st.query_params["topic"]})
    st.title("Delivery guarantees")
    stale = ui.stale_banner()
    missing_permissions.render()
    missing_capabilities.render()
    seen_duplicates.render()
    rows = pipelines_table.render(stale)
    pipeline_card.render(rows, stale)
    if not rows.empty:
        verdict_history.render()
    cluster.render()


ui.run_page(render, "overview")
