"""The groups page's status panel: Burrow's rules over lag from the LSO, per group and
partition, read from the published group_status table (docs/design.md, "Consumer-group
status")."""

from __future__ import annotations

import html

import pandas as pd
import streamlit as st

from dashboard import queries, ui
from dgm.contracts.vocabulary import GroupStatus

# Status -> badge color: healthy green, falling behind orange, stuck or stopped red, a rewind
# (offsets moved backwards: reprocessing ahead) purple.
COLORS: dict[str, str] = {
    GroupStatus.OK: "#1b7f3b",
    GroupStatus.WARN: "#d97706",
    GroupStatus.STALL: "#c62828",
    GroupStatus.STOP: "#c62828",
    GroupStatus.ERR: "#991b1b",
    GroupStatus.REWIND: "#7c3aed",
}
NOT_STALLED = tuple(status for status in GroupStatus if not status.stalled)
RULES = """Burrow's rules, over the last samples of each partition, lag from the LSO:
**OK** lag reached 0 or fell; **WARN** the offset moves but lag never fell and grew;
**STALL** a member owns the partition but its committed offset has not moved; **STOP** no
member and the offset has not moved; **ERR** the same while lag grows; **REWIND** the
committed offset moved backwards. The group shows its worst partition."""


def badge(status: str) -> str:
    color = COLORS.get(status, "#6b7280")
    return (
        f'<span data-status="{html.escape(status)}" style="background:{color};color:white;'
        'font-weight:700;padding:0.1rem 0.5rem;border-radius:0.3rem">'
        f"{html.escape(status)}</span>"
    )


def pinned_note(row: pd.Series) -> str | None:
    """A line when lag from the HW exceeds lag from the LSO at the newest sample: the HW runs
    ahead of the LSO only while a transaction is open, so the difference is what it pins."""
    hw, lso = row["hw_lag_end"], row["lso_lag_end"]
    if pd.isna(hw) or pd.isna(lso) or hw <= lso:
        return None
    topic = row.get("topic")  # none on the group's own row
    where = "" if topic is None or pd.isna(topic) else f"{topic}[{row['partition']}]: "
    text = (
        f"{where}Lag from the high watermark is {ui.count(hw)}, lag from the LSO "
        f"{ui.count(lso)}. An open transaction pins the LSO: the {ui.count(hw - lso)} records "
        "past it cannot be read by a read_committed consumer yet."
    )
    if row["status"] in NOT_STALLED:
        judged = row["status_from_hw"]
        looks = f" (by lag from the HW it would look {judged})" if judged != row["status"] else ""
        text += f" The consumer is not stalled{looks}."
    return text


def _color(status: object) -> str:
    return f"background-color:{COLORS[str(status)]};color:white" if status in COLORS else ""


def render(group: str) -> None:
    own_rows, partition_rows = queries.group_status(group)
    st.subheader("Status", anchor=False)
    if own_rows.empty:
        st.caption("No status yet: it needs two samples of the group's committed offsets.")
        return
    own = own_rows.iloc[0]
    st.markdown(
        f"{badge(str(own['status']))} {html.escape(str(own['reason']))}", unsafe_allow_html=True
    )
    st.caption(
        f"Judged over the last {own['samples']} samples per partition, "
        f"{ui.when(own['window_start'])} to {ui.when(own['window_end'])}."
    )
    note = pinned_note(own)  # summed over the partitions; the table has each one's lags
    if note:
        st.info(note)
    partitions = partition_rows[
        ["topic", "partition", "status", "status_from_hw", "lso_lag_end", "hw_lag_end",
         "committed_end", "last_commit_at", "member_id", "reason"]
    ]  # fmt: skip
    st.dataframe(
        partitions.style.map(_color, subset=["status", "status_from_hw"]),
        hide_index=True,
        width="stretch",
        key="group-status",
    )
    with st.expander("How the status is decided"):
        st.markdown(RULES)
