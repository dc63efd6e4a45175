"""The groups page's lag in seconds: how old the oldest record the group has not committed
is, whether it is catching up and when (docs/design.md, "Lag in seconds")."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, queries, timerange, ui


def lag_label(latest: pd.DataFrame) -> str:
    """The group's lag in seconds at the newest sample: its oldest uncommitted record's age,
    `≥` when that record arrived before the first retained sample, `± resolution`."""
    known = latest[latest["lag_s"].notna()]
    if known.empty:
        return "n/a"
    oldest = known.loc[known["lag_s"].idxmax()]
    at_least = "≥ " if bool(oldest["lag_s_at_least"]) else ""
    width = oldest["lag_s_resolution"]
    within = (
        f" (± {ui.duration_ms(width * 1000)})" if oldest["lag_s"] > 0 and pd.notna(width) else ""
    )
    return f"{at_least}{ui.duration_ms(oldest['lag_s'] * 1000)}{within}"


def catch_up_label(own: pd.DataFrame) -> str:
    """From the group's own group_status row: `caught up`, `catching up in ~N`, `keeping up`
    (it committed everything within the window), `not catching up`, or `n/a` before two
    samples."""
    if own.empty or pd.isna(own["catching_up"].iloc[0]):
        return "n/a (fewer than 2 samples)"
    row = own.iloc[0]
    if not bool(row["catching_up"]):
        return "not catching up"
    if pd.isna(row["catch_up_s"]):
        return "keeping up"
    if float(row["catch_up_s"]) == 0:
        return "caught up"
    return f"catching up in ~{ui.duration_ms(row['catch_up_s'] * 1000)}"


def render(group: str, latest: pd.DataFrame) -> None:
    """`latest`: the group's lag rows at the newest sample."""
    own, _ = queries.group_status(group)
    left, right = st.columns(2)
    left.metric(
        "Lag in seconds (oldest record not committed)",
        lag_label(latest),
        help="when the record at the committed offset passed the LSO, interpolated between "
        "offsets samples: exact to within their gap (±)",
    )
    right.metric("Catch-up estimate", catch_up_label(own), help=_PACE_HELP)
    within = timerange.current()
    st.plotly_chart(
        charts.lag_seconds_over_time(queries.group_lag(group, within)), key="lag-seconds"
    )


_PACE_HELP = (
    "at the commit and arrival rates of the group's status window: (LSO - committed) / "
    "(commits per second - arrivals per second); not catching up when records arrive as fast "
    "as it commits"
)
