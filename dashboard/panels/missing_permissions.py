"""What the collectors or the audit were refused: every verdict that needs it is weaker, so
the overview says it first (docs/configuration.md, Permissions)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import queries


def render() -> None:
    missing = queries.missing_permissions()
    if missing.empty:
        return
    lines = "\n".join(
        f"- {row.detail}" + (f" (pipelines: {row.pipelines})" if pd.notna(row.pipelines) else "")
        for row in missing.itertuples()
    )
    st.error(
        f"**dgm is refused what it needs to see** (docs/configuration.md, Permissions):\n\n"
        f"{lines}\n\n`dgm check` tries every permission and prints the fix.",
        icon=":material/lock:",
    )
