"""The story of one duplicated id on the topic page (`?topic=NAME&id=ID`): every copy with
its coordinates, producer, transaction state, the group's commit around it and the nearest
fault; and, on request, the copies' values read back from Kafka (copy_values.py): the
published tables hold none."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import story_queries, ui
from dashboard.panels import copy_values

MAX_CHOICES = 1000  # ids offered in the picker; a link may name any other
# One copy as the duplicates table shows it too: why it is a copy, where and when it is, its
# key and its producer's headers.
COPY = ["cause", "partition", "offset", "timestamp", "key", "producer", "seq"]
COLUMNS = [
    "copy_number",
    *COPY,
    "arrived_at",
    "producer_id",
    "producer_epoch",
    "producer_sequence",
    "transaction_state",
    "lineage",
    "group_commit",
    "high_watermark",
    "lso",
    "nearest_fault",
]
CONFIG = {
    "copy_number": st.column_config.NumberColumn("Copy", pinned=True),
    "timestamp": st.column_config.DatetimeColumn(
        "Timestamp", format="YYYY-MM-DD HH:mm:ss.SSS", timezone="UTC"
    ),
    "producer": st.column_config.TextColumn("Producer (dgm-producer)"),
    "seq": st.column_config.NumberColumn("Seq (dgm-seq)"),
    "arrived_at": st.column_config.DatetimeColumn(
        "Readable at",
        format="YYYY-MM-DD HH:mm:ss.SSS",
        timezone="UTC",
        help="when the LSO passed it, between two offsets samples (not its record timestamp)",
    ),
    "producer_id": st.column_config.NumberColumn(
        "Producer id", help="from the copy's record batch, or its open transaction"
    ),
    "producer_epoch": st.column_config.NumberColumn("Epoch"),
    "producer_sequence": st.column_config.NumberColumn(
        "Sequence", help="the record's sequence number in its producer session"
    ),
    "transaction_state": st.column_config.TextColumn("Transaction"),
    "lineage": st.column_config.TextColumn("Source record (dgm-src)"),
    "group_commit": st.column_config.TextColumn("Consumer group's commit around it", width="large"),
    "high_watermark": st.column_config.NumberColumn("HW then", help="newest sample before it"),
    "lso": st.column_config.NumberColumn("LSO then", help="newest sample before it"),
    "nearest_fault": st.column_config.TextColumn("Nearest fault", width="large"),
}


def _pick(ids: list[str]) -> str | None:
    wanted = st.query_params.get("id")
    choices = ids[:MAX_CHOICES]
    if wanted and wanted not in choices:
        choices = [wanted, *choices]
    if not choices:
        return None
    index = choices.index(wanted) if wanted in choices else 0
    # No key: the picker follows the URL, and a choice goes back into it (a shareable link).
    chosen: str | None = st.selectbox("Duplicated id", choices, index=index)
    if chosen is not None and chosen != wanted:
        st.query_params["id"] = chosen
    return chosen


def fault_sentence(row: pd.Series) -> str:
    if row.get("fault") is None or pd.isna(row.get("fault")):
        return "no fault observed"
    seconds = float(row["fault_after_s"])
    when = f"{abs(seconds):.1f} s {'after' if seconds >= 0 else 'before'} this copy"
    detail = f": {row['fault_detail']}" if row.get("fault_detail") else ""
    return f"{row['fault']} {when}{detail}"


def _narrative(message_id: str, topic: str, copies: pd.DataFrame) -> str:
    first = copies.iloc[0]
    lines = [
        f"**`{message_id}`: {ui.count(first['copies'])} copies in {topic}**, cause "
        f"**{first['cause']}**"
        + (f" (pipeline {first['pipeline']})" if pd.notna(first["pipeline"]) else "")
    ]
    told = copies["evidence"].dropna().unique() if "evidence" in copies else []
    lines += [f"- evidence: {e}" for e in told]
    for _, c in copies.iterrows():
        at = (
            pd.Timestamp(c["timestamp"]).strftime("%H:%M:%S.%f")[:-3]
            if pd.notna(c["timestamp"])
            else "?"
        )
        readable = (
            f", readable at {pd.Timestamp(c['arrived_at']).strftime('%H:%M:%S')}"
            f" (±{float(c['arrival_resolution_s']):.0f} s)"
            if pd.notna(c.get("arrived_at")) and pd.notna(c.get("arrival_resolution_s"))
            else ""
        )
        session = (
            f", producer id {int(c['producer_id'])} epoch {int(c['producer_epoch'])}"
            if pd.notna(c.get("producer_id")) and pd.notna(c.get("producer_epoch"))
            else ""
        )
        lines.append(
            f"- copy {c['copy_number']}: partition {c['partition']}, offset "
            f"{ui.count(c['offset'])}, at {at}{readable}{session}, {c['transaction_state']}; "
            f"{c['group_commit']}; nearest fault: {c['nearest_fault']}"
        )
    return "\n".join(lines)


def render(topic: str, ids: list[str]) -> None:
    st.subheader("The story of one duplicate", anchor=False)
    message_id = _pick(ids)
    if message_id is None:
        return
    copies = story_queries.story(topic, message_id)
    if copies.empty:
        st.info(f"`{message_id}` is not a duplicated id of {topic}.")
        return
    copies["group_commit"] = [story_queries.commit_sentence(r) for _, r in copies.iterrows()]
    copies["nearest_fault"] = [fault_sentence(r) for _, r in copies.iterrows()]
    st.markdown(_narrative(message_id, topic, copies))
    with st.container(key="story"):  # st-key-story: what a browser test finds
        st.dataframe(copies[COLUMNS], column_config=CONFIG, hide_index=True, width="stretch")
    st.caption(
        "Copies are committed records (aborted ones are not duplicates). Producer id, "
        "epoch and sequence come from the copy's record batch (or its transaction while it "
        "is open); 'readable at' is when the LSO passed it, between two samples; the group's "
        "commit is the sample nearest before and after it becoming readable, on its source "
        "partition. Values are never published: they are read from Kafka when asked for, "
        "decoded by their writer schema where a schema registry framed them."
    )
    copy_values.render(topic, message_id, copies)
