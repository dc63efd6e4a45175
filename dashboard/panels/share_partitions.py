"""The groups page's share-partitions (KIP-932), at the newest sample: where each start offset
stands against the end of the log, what lies between as the broker counts it, and how many
records the group's pipelines received again (docs/design.md, "Share groups")."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import queries

WHY = """Every record below a **start offset** is acknowledged or archived: what the group's
pipelines claim. Between it and the **end** of the log lie records in flight, not yet
delivered, or already acknowledged while earlier ones were still in flight. The broker counts
those not yet acknowledged (its **share lag**, Kafka 4.2 and later); the rest were
**acknowledged above the start offset**, which Kafka's admin API does not name one by one, so
no pipeline claims them until the start offset passes them. **Redelivered copies** are the
extra copies the pipelines made of records the group delivered again."""


def table(latest: pd.DataFrame, redelivered: pd.DataFrame) -> pd.DataFrame:
    """One row per share-partition: `latest` (group_lag rows of one sample) with the
    acknowledged records above the start offset and `redelivered` (redelivered_copies)."""
    rows = latest[["topic", "partition", "committed_offset", "lag_from_hw", "share_lag"]]
    rows = rows.merge(redelivered, on=["topic", "partition"], how="left")
    above = rows["lag_from_hw"]  # the high watermark minus the start offset
    return pd.DataFrame(
        {
            "topic": rows["topic"],
            "partition": rows["partition"],
            "start offset": rows["committed_offset"],
            "end": rows["committed_offset"] + above,
            "above start": above,
            "share lag": rows["share_lag"],
            "acknowledged above start": above - rows["share_lag"],
            "redelivered copies": rows["redelivered_copies"].fillna(0).astype("int64"),
        }
    ).sort_values(["topic", "partition"])


def render(group: str, latest: pd.DataFrame) -> None:
    """`latest`: the share group's lag rows at the newest sample."""
    st.subheader("Share-partitions")
    st.dataframe(table(latest, queries.redelivered_copies(group)), hide_index=True)
    if latest["share_lag"].isna().all():
        st.caption(
            "This broker does not tell share lag (DescribeShareGroupOffsets v1, Kafka 4.2+)."
        )
    st.markdown(WHY)
