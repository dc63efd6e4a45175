"""The transactions page's stuck LSOs: partitions whose LSO has not moved while records sit
above it, at the newest sample."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import ui


def render(latest: pd.DataFrame) -> None:
    """`latest`: partition_offsets at the newest sample."""
    st.subheader("Stuck LSOs", anchor=False)
    stuck = latest[latest["lso_stuck_ms"].fillna(0) > 0]
    if stuck.empty:
        st.success("No partition's LSO is stuck at the newest sample.")
        return
    st.warning(
        f"{len(stuck)} partition(s) have an LSO that has not moved while records sit "
        "above it: read_committed consumers cannot read past it."
    )
    table = stuck.assign(stuck_for=stuck["lso_stuck_ms"].map(ui.duration_ms))
    st.dataframe(
        table[["topic", "partition", "lso", "high_watermark", "lso_lag", "stuck_for"]],
        hide_index=True,
        width="stretch",
    )
