"""The overview's card of one pipeline, the one the URL names (`?pipeline=NAME`, a shareable
link): its badge, rates, evidence, integrity, trend and links to its topics."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, page_paths, queries, timerange, ui
from dashboard.panels import pipeline_sentences as say


def render(rows: pd.DataFrame, stale: bool) -> None:
    """A picker over the pipelines shown (`rows`), then the picked one's card."""
    names = list(rows["pipeline"])
    if not names:
        return
    wanted = st.query_params.get("pipeline")
    if wanted and wanted not in names:
        st.caption(f"`{wanted}` is not among the pipelines shown; showing {names[0]}.")
    index = names.index(wanted) if wanted in names else 0
    # No key: the selectbox follows the URL, and a choice goes back into it (a shareable link).
    name = st.selectbox("Details of", names, index=index)
    if name is None:
        return
    if name != wanted:
        st.query_params["pipeline"] = name
    within = timerange.current()
    windows = queries.pipeline_windows(within, pipeline=name)
    _card(rows[rows["pipeline"] == name].iloc[0], windows, stale)


def _card(v: pd.Series, windows: pd.DataFrame, stale: bool) -> None:
    with st.container(border=True):
        head, badge = st.columns([3, 2], vertical_alignment="center")
        head.subheader(str(v["pipeline"]), anchor=False)
        with badge:
            ui.verdict_badge(v["meets_declared"], str(v["achieved"]), stale)
        st.markdown(
            f"Declared **{v['declared']}** · achieved **{v['achieved']}**" + say.clusters(v)
        )
        _metrics(v)
        st.markdown(say.evidence(v))
        stages = say.stages(v)
        if stages is not None:
            st.markdown(stages)
        _integrity(v)
        if v["why_not_judged"]:
            st.warning(f"**Not judged**: {v['why_not_judged']}.", icon=":material/hourglass_top:")
        if pd.notna(v["holds_since"]):
            st.caption(
                f"Each window's own verdict has been **{v['window_verdict']}** since "
                f"{ui.when(v['holds_since'])}."
            )
        if not windows.empty:
            st.caption(
                f"Duplicate (orange) and loss (red) rate per window, {timerange.current().label}"
            )
            st.plotly_chart(
                charts.sparkline(windows),
                config={"displayModeBar": False},
                key=f"spark-{v['pipeline']}",
            )
        _latency(v)
        _slowest(v)
        _links(v)


def _latency(v: pd.Series) -> None:
    """Its delivery latency's quantiles and histogram, when any record was measured."""
    if not v.get("latency_measured"):
        return
    st.markdown(
        f"**Delivery latency** (readable at the source to readable in the sink, "
        f"{ui.count(v['latency_measured'])} records): p50 {ui.seconds(v['latency_p50_s'])}, "
        f"p95 {ui.seconds(v['latency_p95_s'])}, p99 {ui.seconds(v['latency_p99_s'])}, max "
        f"{ui.seconds(v['latency_max_s'])}; each within "
        "two collector intervals and one bucket (19%)"
    )
    buckets = queries.latency_histogram(str(v["pipeline"]), timerange.current())
    st.plotly_chart(
        charts.latency_histogram(buckets),
        config={"displayModeBar": False},
        key=f"latency-{v['pipeline']}",
    )


def _slowest(v: pd.Series) -> None:
    """Its slowest late records, the evidence behind late_records (docs/design.md, "Late
    records"), when it has any in the range."""
    late = queries.slowest_late_records(str(v["pipeline"]), timerange.current())
    if late.empty:
        return
    st.markdown(
        f"**Slowest late records** ({ui.count(v.get('late_records'))} delivered later than "
        "the pipeline's objective): each source record, how long its first sink copy took "
        "and where that copy lies"
    )
    st.dataframe(late, hide_index=True, width="stretch", key=f"late-{v['pipeline']}")


def _metrics(v: pd.Series) -> None:
    cells = st.columns(5)
    cells[0].metric(
        "Duplicate rate",
        ui.rate(v["duplicate_rate"]),
        help=f"{ui.count(v['duplicate_copies'])} extra copies / "
        f"{ui.count(v['distinct_ids'])} distinct ids in the sink" + say.kept(v),
    )
    cells[1].metric(
        "Loss rate",
        ui.rate(v["loss_rate"]),
        help=f"{ui.count(v['lost'])} lost / {ui.count(v['records_checked'])} records checked"
        + say.kept(v),
    )
    cells[2].metric(
        "Aborted reads",
        ui.count(v["aborted_reads"]),
        help="sink records whose id the source holds only in aborted transactions",
    )
    cells[3].metric(
        "LSO lag",
        ui.count(v["lso_lag"]),
        help="max high watermark - LSO over the pipeline's topics at the newest sample",
    )
    cells[4].metric("Faults observed", ui.count(v["faults_observed"]))


def _integrity(v: pd.Series) -> None:
    """The truncations of its topics, when there are any (the topic pages list them)."""
    truncated = say.counted(v, "truncated_records")
    inconsistent = say.counted(v, "inconsistent_offsets")
    if truncated or inconsistent:
        st.error(
            f"**Log integrity**: {ui.count(truncated)} truncated records (Jepsen: lost-write) "
            f"and {ui.count(inconsistent)} inconsistent offsets (Jepsen: inconsistent-offsets) "
            "in its topics: a log was truncated and its offsets reused. The topic pages list "
            "them.",
            icon=":material/content_cut:",
        )


def _links(v: pd.Series) -> None:
    """One link per source and sink topic to its drill-down."""
    sources, sinks = say.topics(v["source_topics"]), say.topics(v["sink"])
    links = st.columns(max(len(sources) + len(sinks), 1))
    for cell, (role, topic) in zip(
        links, [("source", t) for t in sources] + [("sink", t) for t in sinks], strict=False
    ):
        cell.page_link(
            page_paths.TOPIC,
            label=f"{role}: {topic}",
            query_params={"topic": topic},
            icon=":material/search:",
        )
