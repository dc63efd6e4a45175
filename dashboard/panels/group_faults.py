"""The groups page's rebalances and restarts: the faults of the group or of its pipelines in
the time range (or every fault, on demand)."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, queries, timerange


def render(group: str) -> None:
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
