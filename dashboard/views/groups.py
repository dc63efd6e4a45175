"""Consumer groups: status by Burrow's rules, lag from the high watermark next to lag from the
LSO, and faults."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, group_status, queries, timerange, ui

WHY = """**Why two lags?** Lag from the high watermark (HW - committed) is what other tools show.
On transactional topics it counts records a read_committed consumer cannot or will not read:
transaction control markers (each takes an offset), records of aborted transactions, and
records of transactions still open. Lag from the LSO (LSO - committed) is what the consumer
can actually still read. A large HW lag with a small LSO lag usually means an open or hanging
transaction pins the LSO (see Transactions & LSO)."""


def _faults(group: str) -> None:
    st.subheader("Rebalances and restarts", anchor=False)
    faults = queries.faults(timerange.current())
    verdicts = queries.verdicts()
    pipelines = set(verdicts.loc[verdicts["consumer_group"] == group, "pipeline"])
    everything = st.toggle("Show every fault (not only this group's)", key="all-faults")
    if not everything:
        faults = faults[(faults["group_id"] == group) | faults["pipeline"].isin(pipelines)]
    st.plotly_chart(charts.faults_timeline(faults), key="faults")
    if not faults.empty:
        st.dataframe(
            faults[["at", "event", "group_id", "pipeline", "detail"]],
            hide_index=True,
            width="stretch",
        )


def render() -> None:
    st.title("Consumer groups")
    ui.stale_banner()
    groups = queries.group_ids()
    if not groups:
        st.info("No consumer group offsets sampled yet: is `dgm collect` running?")
        return
    help_text = "ordered by how much HW lag exceeds LSO lag, largest first"
    group = str(ui.pick_from_url("Group", groups, "group", help=help_text))
    mine = queries.group_lag(group)
    latest = mine[mine["sampled_at"] == mine["sampled_at"].max()]
    state = latest["group_state"].dropna()
    st.caption(f"State at the newest sample: {state.iloc[0] if not state.empty else 'unknown'}")
    group_status.render(group)
    left, right = st.columns(2)
    left.metric("Lag from HW (other tools)", ui.count(latest["lag_from_hw"].sum()))
    right.metric("Lag from LSO (transaction-correct)", ui.count(latest["lag_from_lso"].sum()))
    st.plotly_chart(charts.lag_both_ways(latest), key="lag-both")
    st.markdown(WHY)
    within = timerange.current()  # the over-time views; the metrics above: the newest sample
    st.caption(f"Lag over time and faults: {within.label}.")
    st.plotly_chart(charts.lag_over_time(queries.group_lag(group, within)), key="lag-time")
    _faults(group)


ui.run_page(render, "groups")
