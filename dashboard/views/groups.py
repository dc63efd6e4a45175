"""Consumer groups: status by Burrow's rules, lag in seconds with the catch-up estimate, lag
from the high watermark next to lag from the LSO, and faults."""

from __future__ import annotations

import streamlit as st

from dashboard import queries, ui
from dashboard.panels import group_faults, group_lag, group_status, lag_seconds, share_partitions
from dgm.contracts.vocabulary import GroupType


def render() -> None:
    st.title("Consumer groups")
    ui.stale_banner()
    group = ui.pick_or_say(
        "Group",
        queries.group_ids(),
        "group",
        none="No consumer group offsets sampled yet: is `dgm collect` running?",
        help="ordered by how much HW lag exceeds LSO lag, largest first",
    )
    if group is None:
        return
    mine = queries.group_lag(group)
    latest = mine[mine["sampled_at"] == mine["sampled_at"].max()]
    state = latest["group_state"].dropna()
    st.caption(f"State at the newest sample: {state.iloc[0] if not state.empty else 'unknown'}")
    share = GroupType.SHARE in set(latest["group_type"].dropna())
    if share:
        st.info(
            "A **share group** (KIP-932): it commits no offsets. Its committed offset here is "
            "each partition's share-partition start offset, below which every record is "
            "acknowledged or archived; lag counts the records above it, in flight or not yet "
            "delivered. The broker moves a start offset when it next acquires records, so "
            "after a partition's last records it trails them. Where the broker counts its "
            "share lag (Kafka 4.2+), the status judges that instead: a finished group reads "
            "OK; before, a group left without members reads STOP. Its pipelines' duplicates "
            'are redeliveries (docs/design.md, "Share groups").'
        )
    group_status.render(group)
    if share:
        share_partitions.render(group, latest)
    lag_seconds.render(group, latest)
    group_lag.render(group, latest)
    group_faults.render(group)


ui.run_page(render, "groups")
