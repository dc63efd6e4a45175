"""Entry point: `streamlit run dashboard/app.py` (or `dgm dashboard`).

Pages over the tables `dgm analyze` publishes; the sidebar says how fresh they are and
warns, loudly, when they are STALE.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard import queries, timerange, ui
from dgm.config.problems import ConfigError

HERE = Path(__file__).parent
# Not "pages/": Streamlit runs a pages/ folder as v1 pages, and a direct link like
# /topic?topic=X would then run the page without this script (no navigation, no freshness).
VIEWS = HERE / "views"

st.set_page_config(
    page_title="dgm: delivery guarantees", page_icon=":material/verified:", layout="wide"
)

page = st.navigation(
    [
        st.Page(
            VIEWS / "overview.py",
            title="Overview",
            icon=":material/dashboard:",
            url_path="overview",
            default=True,
        ),
        st.Page(
            VIEWS / "topic.py", title="Topic drill-down", icon=":material/search:", url_path="topic"
        ),
        st.Page(
            VIEWS / "transactions.py",
            title="Transactions & LSO",
            icon=":material/receipt_long:",
            url_path="transactions",
        ),
        st.Page(
            VIEWS / "groups.py", title="Consumer groups", icon=":material/group:", url_path="groups"
        ),
        st.Page(
            VIEWS / "alerts.py", title="Alerts", icon=":material/notifications:", url_path="alerts"
        ),
    ]
)


def _freshness() -> None:
    try:
        fresh = ui.freshness()
    except (queries.NoDatabase, queries.UnreadableDatabase, ConfigError):
        st.warning(
            "**No readable analysis**: nothing to judge freshness by.", icon=":material/warning:"
        )
        return
    st.markdown("**Data freshness**")
    st.caption(
        f"Last analysis: {ui.when(fresh.finished_at)}  \n"
        f"Last collected sample: {ui.when(fresh.last_sample_at)}"
    )
    if fresh.stale:
        st.error("**STALE** — " + "; ".join(fresh.reasons), icon=":material/warning:")
    elif fresh.running:
        st.info(f"Fresh — {fresh.running}", icon=":material/autorenew:")
    else:
        st.success("Fresh", icon=":material/check_circle:")


def _audit_progress() -> None:
    try:
        line = ui.audit_progress_line()
    except ConfigError:
        return  # _freshness already says the config cannot be read
    if line is not None:
        st.caption(line)


with st.sidebar:
    timerange.sidebar()  # every page reads the range from the URL this keeps

    @st.fragment(run_every=ui.refresh_every())
    def freshness() -> None:
        _freshness()
        _audit_progress()

    freshness()

page.run()
