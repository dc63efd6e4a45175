"""The overview's table: every pipeline in one sortable table, violating first, with a text
filter and "violating only"; a selected row names the pipeline whose card follows."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st
from streamlit.elements.lib.column_types import ColumnConfig

from dashboard import pipeline_queries, queries, ui
from dashboard.panels.pipeline_sentences import claim_text

_PICKED = "overview-picked-row"  # the table's last selection, to tell a new one from an old


def _count(label: str, help: str | None = None) -> ColumnConfig:
    return st.column_config.NumberColumn(label, help=help, format="localized")


def _rate(label: str, help: str | None = None) -> ColumnConfig:
    return st.column_config.NumberColumn(label, help=help, format="percent")


COLUMNS = {
    "pipeline": st.column_config.TextColumn("Pipeline", pinned=True),
    "verdict": st.column_config.TextColumn(
        "Verdict", help="achieved vs declared: MEETS, VIOLATES or INSUFFICIENT EVIDENCE"
    ),
    "declared": st.column_config.TextColumn("Declared"),
    "achieved": st.column_config.TextColumn("Achieved", help="cumulative over the retention"),
    "filtered": _count(
        "Filtered",
        "source records the pipeline's `expected` predicate excludes: never checked, never lost",
    ),
    "duplicate_rate": _rate("Duplicate rate"),
    "loss_rate": _rate("Loss rate"),
    "aborted_reads": _count("Aborted reads"),
    "torn_commits": _count(
        "Torn commits",
        "lost records whose sink copy exists only in aborted transactions while the claim "
        "covers them: a transaction protocol failure",
    ),
    "producer_out_of_order": _count(
        "Out of order (producer)",
        "source records behind a higher dgm-seq of their producer session (order: beside the "
        "verdict, never part of it)",
    ),
    "sink_out_of_order": _count(
        "Out of order (sink)",
        "sink records behind a higher offset of their source partition (order)",
    ),
    "truncated_records": _count(
        "Truncated",
        "records of its topics audited at an offset a truncated log no longer holds them at "
        "(Jepsen: lost-write)",
    ),
    "inconsistent_offsets": _count(
        "Inconsistent offsets",
        "audited offsets of its topics that hold another id now (Jepsen: inconsistent-offsets)",
    ),
    "latency_p99_s": st.column_config.NumberColumn(
        "p99 latency (s)",
        help="99th percentile of the delivery latency: readable at the source to readable in "
        "the sink",
        format="%.3g",
    ),
    "duplicate_causes": st.column_config.TextColumn(
        "Duplicates by cause",
        help="the sink's extra copies per cause, with or without dgm's headers "
        '(docs/design.md, "Causes without dgm\'s headers")',
    ),
    "producer_achieved": st.column_config.TextColumn(
        "Producer",
        help="what reached the first source: the producer stage's semantic (its retries' "
        "extra copies, its sequence gaps), which the pipeline's own verdict does not count",
    ),
    "producer_duplicate_rate": _rate(
        "Producer dup. rate", "extra copies already in the first source"
    ),
    "end_to_end_achieved": st.column_config.TextColumn(
        "End to end",
        help="the producer and every pipeline from the first source to this sink, composed",
    ),
    "lso_lag": _count("LSO lag", "max over its topics' partitions at the newest sample"),
    "faults_observed": _count("Faults"),
    "evidence": st.column_config.TextColumn("Evidence", help="tested | untested | none"),
    "claim_shown": st.column_config.TextColumn(
        "Claim", help="what says a source record should already be in the sink"
    ),
    "late_records": _count("Late", "deadline claim: copies written later than max_delay"),
    "window_verdict": st.column_config.TextColumn(
        "Latest windows", help="the verdict of the newest judged windows"
    ),
    "holds_since": st.column_config.DatetimeColumn(
        "Holds since",
        help="start of the earliest window since which every judged window had this verdict",
        format="YYYY-MM-DD HH:mm:ss",
        timezone="UTC",
    ),
    "group_status": st.column_config.TextColumn(
        "Group status", help="the consumer group's status by Burrow's rules (its worst partition)"
    ),
    "consumer_lag_s": st.column_config.NumberColumn(
        "Lag (s)",
        help="the consumer group's lag in seconds: the age of the oldest record it has not "
        "committed, at the newest sample (± the sampling interval)",
        format="%.0f",
    ),
    "why_not_judged": st.column_config.TextColumn(
        "Not judged because", help="why some counts have no verdict yet", width="large"
    ),
}
_COLORS = {"green": "#d7f0dd", "red": "#f8d4d4", "gray": "#e5e7eb", "orange": "#fde7c4"}


def _verdict(meets: object, achieved: object, stale: bool) -> str:
    label, _ = ui.badge_label(meets, str(achieved), stale)
    return label


def _style(rows: pd.DataFrame, stale: bool) -> Any:
    """The shown columns only, the verdict and achieved cells in the badge's color."""
    tones = [
        _COLORS[ui.badge_label(m, str(a), stale)[1]]
        for m, a in zip(rows["meets_declared"], rows["achieved"], strict=True)
    ]
    shown = rows[[c for c in COLUMNS if c in rows]]

    def color(row: pd.Series) -> list[str]:
        css = f"background-color: {tones[shown.index.get_loc(row.name)]}; font-weight: 600"
        return [css if c in ("verdict", "achieved") else "" for c in row.index]

    return shown.style.apply(color, axis=1)


def render(stale: bool) -> pd.DataFrame:
    """The pipelines table with its filters; returns the rows shown."""
    st.header("Pipelines", anchor=False)
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    text = left.text_input(
        "Filter", placeholder="pipeline, topic or consumer group contains…", key="overview-filter"
    )
    violating = right.toggle("Violating only", key="overview-violating")
    rows = pipeline_queries.overview(text.strip(), violating)
    if rows.empty:
        if text.strip() or violating:
            st.info("No pipeline matches the filter.")
        else:
            st.info(
                "No pipeline verdicts yet: declare pipelines in dgm.toml (`dgm lab run` adds "
                "one), then let `dgm analyze` run."
            )
        return rows
    settings = queries.config().analysis
    rows["verdict"] = [
        _verdict(m, a, stale) for m, a in zip(rows["meets_declared"], rows["achieved"], strict=True)
    ]
    rows["claim_shown"] = [claim_text(r) for _, r in rows.iterrows()]
    rows["why_not_judged"] = [
        pipeline_queries.why_not_judged(r, settings.grace_s, settings.min_records)
        for _, r in rows.iterrows()
    ]
    if not pipeline_queries.has_group_status():
        rows = rows.drop(columns=["group_status", "consumer_lag_s"])
    total = len(rows)
    violating_count = int((rows["meets_declared"] == False).sum())  # noqa: E712 (nullable)
    st.caption(
        f"{total} pipeline(s), {violating_count} violating. Verdicts and rates are cumulative "
        "over the fingerprint retention; select a row for its details."
    )
    event = st.dataframe(
        _style(rows, stale),
        column_config=COLUMNS,
        column_order=[c for c in COLUMNS if c in rows],
        hide_index=True,
        width="stretch",
        on_select="rerun",
        selection_mode="single-row",
        key="overview-table",
        height=min(38 + 35 * max(total, 1), 740),
    )
    picked = list(event.selection.rows) if event is not None else []
    if picked != st.session_state.get(_PICKED, []):  # a new selection, not the last one again
        st.session_state[_PICKED] = picked
        if picked and picked[0] < total:
            st.query_params["pipeline"] = str(rows.iloc[picked[0]]["pipeline"])
    return rows
