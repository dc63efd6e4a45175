"""What the clusters' brokers cannot answer (their API versions lack it): said beside what dgm
is refused, as a warning, not an error: dgm works with less and says what
(docs/compatibility.md, Capabilities)."""

from __future__ import annotations

import streamlit as st

from dashboard import queries


def render() -> None:
    missing = queries.missing_capabilities()
    if missing.empty:
        return
    lines = "\n".join(f"- {detail}" for detail in missing["detail"])
    st.warning(
        f"**The brokers cannot answer everything dgm asks** (docs/compatibility.md, "
        f"Capabilities):\n\n{lines}\n\n`dgm check` lists every capability and the upgrade "
        "that brings it.",
        icon=":material/info:",
    )
