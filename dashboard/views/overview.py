"""Overview: one card per pipeline (declared vs achieved, with the evidence) and the cluster."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from dashboard import charts, queries, ui

TOPIC_PAGE = "views/topic.py"

EVIDENCE = {
    "tested": "**Tested**: {faults} fault(s) (rebalances, restarts, producer epoch bumps, "
    "outages) observed while the {checked} checked records flowed.",
    "untested": "**Untested**: no fault was seen while the {checked} checked records flowed. "
    "Zero anomalies with no fault seen is weaker evidence than zero anomalies across crashes "
    "and rebalances.",
    "none": "**No evidence**: no checked record's fate is known yet.",
}


def _topics(value: Any) -> list[str]:
    return [] if value is None else [str(t) for t in value]


def _lso_lag(topics: list[str], offsets: pd.DataFrame) -> str:
    rows = offsets[offsets["topic"].isin(topics)]
    return "n/a" if rows.empty else ui.count(rows["lso_lag"].max())


def _card(v: pd.Series, windows: pd.DataFrame, offsets: pd.DataFrame, stale: bool) -> None:
    sources, sinks = _topics(v["source_topics"]), _topics(v["sink"])
    with st.container(border=True):
        head, badge = st.columns([3, 2], vertical_alignment="center")
        head.subheader(str(v["pipeline"]), anchor=False)
        with badge:
            ui.verdict_badge(v["meets_declared"], str(v["achieved"]), stale)
        st.markdown(f"Declared **{v['declared']}** · achieved **{v['achieved']}**")
        cells = st.columns(5)
        cells[0].metric(
            "Duplicate rate",
            ui.rate(v["duplicate_rate"]),
            help=f"{ui.count(v['duplicate_copies'])} extra copies / "
            f"{ui.count(v['distinct_ids'])} distinct ids in the sink",
        )
        cells[1].metric(
            "Loss rate",
            ui.rate(v["loss_rate"]),
            help=f"{ui.count(v['lost'])} lost / {ui.count(v['records_checked'])} records checked",
        )
        cells[2].metric(
            "Aborted reads",
            ui.count(v["aborted_reads"]),
            help="sink records whose id the source holds only in aborted transactions",
        )
        cells[3].metric(
            "LSO lag",
            _lso_lag(sources + sinks, offsets),
            help="max high watermark - LSO over the pipeline's topics at the newest sample",
        )
        cells[4].metric("Faults observed", ui.count(v["faults_observed"]))
        evidence = str(v["evidence"]) if pd.notna(v["evidence"]) else "none"
        st.markdown(
            EVIDENCE.get(evidence, "**Evidence**: {evidence}").format(
                faults=ui.count(v["faults_observed"]),
                checked=ui.count(v["records_checked"]),
                evidence=evidence,
            )
        )
        trend = windows[windows["pipeline"] == v["pipeline"]]
        if not trend.empty:
            st.caption("Duplicate (orange) and loss (red) rate per window")
            st.plotly_chart(
                charts.sparkline(trend),
                config={"displayModeBar": False},
                key=f"spark-{v['pipeline']}",
            )
        links = st.columns(max(len(sources) + len(sinks), 1))
        for cell, (role, topic) in zip(
            links, [("source", t) for t in sources] + [("sink", t) for t in sinks], strict=False
        ):
            cell.page_link(
                TOPIC_PAGE,
                label=f"{role}: {topic}",
                query_params={"topic": topic},
                icon=":material/search:",
            )


def _cluster() -> None:
    summary = queries.cluster_summary()
    cells = st.columns(5)
    for cell, (label, key) in zip(
        cells,
        [
            ("Topics", "topics"),
            ("Partitions", "partitions"),
            ("Consumer groups", "groups"),
            ("Open transactions", "open_transactions"),
            ("Hanging transactions", "hanging_transactions"),
        ],
        strict=True,
    ):
        cell.metric(label, summary[key])
    if summary["hanging_transactions"]:
        st.warning(
            f"{summary['hanging_transactions']} hanging transaction(s) pin the LSO: "
            "read_committed consumers stall. See Transactions & LSO.",
            icon=":material/lock_clock:",
        )


def render() -> None:
    if "topic" in st.query_params:  # a shared `/?topic=NAME` link means the drill-down
        st.switch_page(TOPIC_PAGE, query_params={"topic": st.query_params["topic"]})
    st.title("Delivery guarantees")
    stale = ui.stale_banner()
    verdicts = queries.verdicts()
    windows = queries.pipeline_windows()
    offsets = queries.latest_offsets()
    st.header("Pipelines", anchor=False)
    if verdicts.empty:
        st.info(
            "No pipeline verdicts yet: declare pipelines in dgm.toml (`dgm lab run` adds "
            "one), then let `dgm analyze` run."
        )
    for _, v in verdicts.iterrows():
        _card(v, windows, offsets, stale)
    st.header("Cluster", anchor=False)
    _cluster()


ui.run_page(render, "overview")
