"""Topic drill-down (shareable: `?topic=NAME&id=ID`): rates and duplicates by cause over the
time range, heat map, duplicates, the story of one duplicated id, lost ids, records out of
order, and the log's integrity (truncated records, inconsistent offsets).

Only ids, keys and record coordinates are shown: the published tables hold no payloads.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, queries, story_view, timerange, ui
from dgm.contracts.vocabulary import Anomaly, OrderAnomaly

DUPLICATE_COLUMNS = [
    "message_id",
    "copy_number",
    "copies",
    "cause",
    "partition",
    "offset",
    "timestamp",
    "key",
    "producer",
    "seq",
    "lineage",
    "pipeline",
]
MAX_ROWS = 5000  # shown in the table; the CSV download has every row
LOST_COLUMNS = [
    "message_id",
    "cause",
    "partition",
    "offset",
    "timestamp",
    "producer",
    "seq",
    "missing",
    "pipeline",
]

ANOMALY_COLUMNS = [
    "anomaly",
    "jepsen",
    "partition",
    "offset",
    "message_id",
    "now_message_id",
    "timestamp",
    "producer",
    "seq",
    "detected_at",
]


def _matching(frame: pd.DataFrame, key: str, text_label: str) -> pd.Series:
    """Row mask from the filter widgets: text (id or key), partitions, causes."""
    left, middle, right = st.columns([2, 1, 2])
    text = left.text_input(text_label, key=f"{key}-text").strip()
    partitions = middle.multiselect(
        "Partition", sorted(frame["partition"].dropna().unique()), key=f"{key}-partition"
    )
    causes = right.multiselect(
        "Cause", sorted(frame["cause"].dropna().unique()), key=f"{key}-cause"
    )
    mask = pd.Series(True, index=frame.index)
    if text:
        fields = ["message_id", "key"] if "key" in frame else ["message_id"]
        hits = [frame[f].fillna("").str.contains(text, case=False, regex=False) for f in fields]
        mask &= pd.concat(hits, axis=1).any(axis=1)
    if partitions:
        mask &= frame["partition"].isin(partitions)
    if causes:
        mask &= frame["cause"].isin(causes)
    return mask


def _table(frame: pd.DataFrame) -> None:
    if len(frame) > MAX_ROWS:
        st.caption(f"Showing the first {MAX_ROWS:,} of {len(frame):,} rows; the CSV has them all.")
    st.dataframe(frame.head(MAX_ROWS), hide_index=True, width="stretch")


def _download(frame: pd.DataFrame, name: str, key: str) -> None:
    st.download_button(
        f"Download {name} (CSV)",
        frame.to_csv(index=False).encode(),
        file_name=name,
        mime="text/csv",
        key=key,
        icon=":material/download:",
    )


def _duplicates(topic: str, within: timerange.TimeRange) -> None:
    st.header("Duplicates", anchor=False)
    st.plotly_chart(
        charts.duplicates_by_cause(queries.duplicates_by_cause(topic, within)), key="by-cause"
    )
    frame = queries.duplicates(topic, within)
    if frame.empty:
        st.success(f"No duplicated ids in this topic, {within.label}.")
        return
    mask = _matching(frame, f"dup-{topic}", "Message id or key contains")
    # A match on any copy shows the id with every copy.
    ids = frame.loc[mask, "message_id"].unique()
    shown = frame[frame["message_id"].isin(ids)]
    total = frame["message_id"].nunique()
    extra = int(shown["is_extra_copy"].sum())
    of = "" if len(ids) == total else f" (of {total})"
    st.markdown(f"**{len(ids)} duplicated ids**{of}, {extra} extra copies")
    by_cause = shown[shown["is_extra_copy"]].groupby("cause").size()
    if not by_cause.empty:
        st.caption("Extra copies by cause: " + ", ".join(f"{c}: {n}" for c, n in by_cause.items()))
    _table(shown[DUPLICATE_COLUMNS])
    _download(shown[DUPLICATE_COLUMNS], f"duplicates-{topic}.csv", f"dup-csv-{topic}")
    story_view.render(topic, [str(i) for i in ids])


def _lost(topic: str, within: timerange.TimeRange) -> None:
    st.header("Lost", anchor=False)
    st.caption(
        "Ids of the pipelines that read or write this topic, at their source coordinates "
        f"({within.label}; sequence gaps, which have no time, always)."
    )
    frame = queries.lost(topic, within)
    if frame.empty:
        st.success("No lost ids read from this topic or by a pipeline writing it.")
        return
    shown = frame[_matching(frame, f"lost-{topic}", "Message id contains")]
    missing = int(shown["missing"].fillna(1).sum())
    st.markdown(
        f"**{len(shown)} lost rows**, {missing} missing records (a sequence gap counts its length)"
    )
    _table(shown[LOST_COLUMNS])
    _download(shown[LOST_COLUMNS], f"lost-{topic}.csv", f"lost-csv-{topic}")


ORDER_COLUMNS = [
    "anomaly",
    "partition",
    "offset",
    "timestamp",
    "message_id",
    "stream",
    "position",
    "preceded_by",
    "preceded_at",
    "pipeline",
]


def _order(topic: str, within: timerange.TimeRange) -> None:
    st.header("Order", anchor=False)
    st.caption(
        f"Records behind a higher position of their stream ({within.label}): "
        f"**{OrderAnomaly.OUT_OF_ORDER}**, a producer session's dgm-seq (position) fell "
        f"within a partition; **{OrderAnomaly.SINK_OUT_OF_ORDER}**, a sink's copies of one "
        "source partition (stream) fell back in source offset. `preceded_by` is the highest "
        "position before the record, at offset `preceded_at`. Order is judged beside the "
        "verdict, never part of it."
    )
    frame = queries.out_of_order(topic, within)
    if frame.empty:
        st.success(f"No record out of order in this topic, {within.label}.")
        return
    by_anomaly = frame.drop_duplicates(["anomaly", "partition", "offset"]).groupby("anomaly")
    st.markdown(
        ", ".join(f"{anomaly}: **{n} records**" for anomaly, n in by_anomaly.size().items())
    )
    _table(frame[ORDER_COLUMNS])
    _download(frame[ORDER_COLUMNS], f"out-of-order-{topic}.csv", f"order-csv-{topic}")


def _integrity(topic: str) -> None:
    st.header("Log integrity", anchor=False)
    st.caption(
        "Audited offsets read again: a record gone from the offset it was audited at is a "
        "truncated record (Jepsen: lost-write), an offset holding another id now an "
        "inconsistent offset (Jepsen: inconsistent-offsets). Over the retention."
    )
    frame = queries.log_anomalies(topic)
    if frame.empty:
        st.success("No truncated record and no inconsistent offset found in this topic.")
        return
    counts = frame.groupby("anomaly").size()
    truncated = int(counts.get(Anomaly.TRUNCATED_RECORD.value, 0))
    inconsistent = int(counts.get(Anomaly.INCONSISTENT_OFFSET.value, 0))
    partitions = ", ".join(str(p) for p in sorted(frame["partition"].unique()))
    st.error(
        f"**{truncated} truncated records** and **{inconsistent} inconsistent offsets** in "
        f"partition(s) {partitions}: the log was truncated and its offsets reused (an unclean "
        "leader election, or a broker bug).",
        icon=":material/content_cut:",
    )
    _table(frame[ANOMALY_COLUMNS])
    _download(frame[ANOMALY_COLUMNS], f"log-anomalies-{topic}.csv", f"anomalies-csv-{topic}")


def _totals(topic: str) -> None:
    totals = queries.topic_totals()
    row = totals[totals["topic"] == topic]
    if row.empty:
        return
    r = row.iloc[0]
    cells = st.columns(6)
    cells[0].metric("Committed records", ui.count(r["records"]))
    cells[1].metric("Distinct ids", ui.count(r["distinct_ids"]))
    cells[2].metric("Extra copies", ui.count(r["duplicate_copies"]))
    cells[3].metric("Duplicate rate", ui.rate(r["duplicate_rate"]))
    cells[4].metric("Aborted records", ui.count(r["aborted"]))
    cells[5].metric(
        "Out of order",
        ui.count(r["out_of_order"]),
        help="records behind a higher dgm-seq of their producer session, or (a sink) a "
        "higher source offset of their source partition",
    )
    one_in = _sampled(topic)
    if one_in > 1:
        st.caption(
            f"Sampled: these counts and the records below are those of 1 in {one_in:,} "
            'message ids, kept by their hash (docs/design.md, "Sampled pipelines"); the '
            "pipelines' rates on the overview carry their 95% intervals. Order is not looked "
            "for in a sampled topic."
        )


def _sampled(topic: str) -> int:
    """1 in how many ids the pipelines reading or writing `topic` keep (1: every id)."""
    verdicts = queries.verdicts()
    if "sample_one_in" not in verdicts.columns:  # a publication of an older dgm
        return 1
    shares = [
        int(v["sample_one_in"])
        for _, v in verdicts.iterrows()
        if pd.notna(v["sample_one_in"])
        and topic in [*(v["source_topics"] or []), *(v["sink"] or [])]
    ]
    return max(shares, default=1)


def render() -> None:
    st.title("Topic drill-down")
    ui.stale_banner()
    topics = queries.topics()
    if not topics:
        st.info("The published tables name no topic yet.")
        return
    topic = ui.pick_from_url("Topic", topics, "topic")
    if topic is None:
        return
    _totals(topic)
    within = timerange.current()
    st.caption(f"Totals over the fingerprint retention; charts and tables: {within.label}.")
    st.plotly_chart(
        charts.rates_over_time(
            queries.topic_windows(topic, within), queries.loss_windows(topic, within)
        ),
        key="rates",
    )
    value = st.radio(
        "Heat map of",
        ["duplicate_copies", "aborted", "records"],
        horizontal=True,
        format_func=lambda v: v.replace("_", " "),
    )
    st.plotly_chart(
        charts.partition_heatmap(queries.partition_windows(topic, within), value), key="heatmap"
    )
    _duplicates(topic, within)
    _lost(topic, within)
    _order(topic, within)
    _integrity(topic)


ui.run_page(render, "topic")
