"""The Alerts page's first line: rules judge the published analysis, so say when there is
none yet, when it cannot be read, or when it is STALE."""

from __future__ import annotations

import streamlit as st

from dashboard import queries, ui


def render() -> None:
    try:
        ui.stale_banner()
    except queries.NoDatabase:
        st.info(
            "**No analysis published yet**, so no rule has been evaluated: rules are "
            "evaluated after every `dgm analyze` run (run `dgm collect` and `dgm analyze`, or "
            "`dgm demo`). Rules added meanwhile are evaluated after the first run.",
            icon=":material/hourglass_empty:",
        )
    except queries.UnreadableDatabase as error:
        st.warning(
            f"The published analysis cannot be read (`{error}`); alerts below are from the "
            "last evaluation that could read it.",
            icon=":material/warning:",
        )
