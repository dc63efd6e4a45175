"""Overview: every pipeline in one sortable table (violating first), the details of the one
selected (kept in the URL: `?pipeline=NAME`), the verdict history and the cluster."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from dashboard import charts, pipeline_queries, queries, timerange, ui, watch_view
from dgm.contracts.clusters import DEFAULT_CLUSTER
from dgm.contracts.vocabulary import Evidence

TOPIC_PAGE = "views/topic.py"
_PICKED = "overview-picked-row"  # the table's last selection, to tell a new one from an old

EVIDENCE: dict[str, str] = {
    Evidence.TESTED: "**Tested**: {faults} fault(s) (rebalances, restarts, producer epoch bumps, "
    "outages) observed while the {checked} checked records flowed.",
    Evidence.UNTESTED: "**Untested**: no fault was seen while the {checked} checked records "
    "flowed. Zero anomalies with no fault seen is weaker evidence than zero anomalies across "
    "crashes and rebalances.",
    Evidence.NONE: "**No evidence**: no checked record's fate is known yet.",
}
COLUMNS = {
    "pipeline": st.column_config.TextColumn("Pipeline", pinned=True),
    "verdict": st.column_config.TextColumn(
        "Verdict", help="achieved vs declared: MEETS, VIOLATES or INSUFFICIENT EVIDENCE"
    ),
    "declared": st.column_config.TextColumn("Declared"),
    "achieved": st.column_config.TextColumn("Achieved", help="cumulative over the retention"),
    "filtered": st.column_config.NumberColumn(
        "Filtered",
        help="source records the pipeline's `expected` predicate excludes: never checked, "
        "never lost",
        format="localized",
    ),
    "duplicate_rate": st.column_config.NumberColumn("Duplicate rate", format="percent"),
    "loss_rate": st.column_config.NumberColumn("Loss rate", format="percent"),
    "aborted_reads": st.column_config.NumberColumn("Aborted reads", format="localized"),
    "torn_commits": st.column_config.NumberColumn(
        "Torn commits",
        help="lost records whose sink copy exists only in aborted transactions while the "
        "claim covers them: a transaction protocol failure",
        format="localized",
    ),
    "producer_out_of_order": st.column_config.NumberColumn(
        "Out of order (producer)",
        help="source records behind a higher dgm-seq of their producer session (order: beside "
        "the verdict, never part of it)",
        format="localized",
    ),
    "sink_out_of_order": st.column_config.NumberColumn(
        "Out of order (sink)",
        help="sink records behind a higher offset of their source partition (order)",
        format="localized",
    ),
    "truncated_records": st.column_config.NumberColumn(
        "Truncated",
        help="records of its topics audited at an offset a truncated log no longer holds them "
        "at (Jepsen: lost-write)",
        format="localized",
    ),
    "inconsistent_offsets": st.column_config.NumberColumn(
        "Inconsistent offsets",
        help="audited offsets of its topics that hold another id now (Jepsen: "
        "inconsistent-offsets)",
        format="localized",
    ),
    "producer_achieved": st.column_config.TextColumn(
        "Producer",
        help="what reached the first source: the producer stage's semantic (its retries' "
        "extra copies, its sequence gaps), which the pipeline's own verdict does not count",
    ),
    "producer_duplicate_rate": st.column_config.NumberColumn(
        "Producer dup. rate", help="extra copies already in the first source", format="percent"
    ),
    "end_to_end_achieved": st.column_config.TextColumn(
        "End to end",
        help="the producer and every pipeline from the first source to this sink, composed",
    ),
    "lso_lag": st.column_config.NumberColumn(
        "LSO lag", help="max over its topics' partitions at the newest sample", format="localized"
    ),
    "faults_observed": st.column_config.NumberColumn("Faults", format="localized"),
    "evidence": st.column_config.TextColumn("Evidence", help="tested | untested | none"),
    "claim_shown": st.column_config.TextColumn(
        "Claim", help="what says a source record should already be in the sink"
    ),
    "late_records": st.column_config.NumberColumn(
        "Late", help="deadline claim: copies written later than max_delay", format="localized"
    ),
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
    "why_not_judged": st.column_config.TextColumn(
        "Not judged because", help="why some counts have no verdict yet", width="large"
    ),
}
_COLORS = {"green": "#d7f0dd", "red": "#f8d4d4", "gray": "#e5e7eb", "orange": "#fde7c4"}


def within_label() -> str:
    return timerange.current().label


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


def _table(stale: bool) -> pd.DataFrame:
    """The pipelines table with its filters; returns the rows shown."""
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
        rows = rows.drop(columns=["group_status"])
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


def claim_text(row: pd.Series) -> str:
    """'deadline (max_delay 5m)': the verdict's claim and its detail ('' from a publication
    of an older dgm, which had no claim column)."""
    claim, detail = row.get("claim"), row.get("claim_detail")
    if claim is None or pd.isna(claim):
        return ""
    return f"{claim} ({detail})" if detail is not None and not pd.isna(detail) else str(claim)


def _late(v: pd.Series) -> str:
    late = v.get("late_records")
    if late is None or pd.isna(late) or int(late) == 0:
        return ""
    return (
        f" **{ui.count(late)}** late records: their sink copy came later than max_delay "
        "(delivered, not lost)."
    )


def _counted(v: pd.Series, name: str) -> int:
    value = v.get(name)
    return 0 if value is None or pd.isna(value) else int(value)


def _torn_and_order(v: pd.Series) -> str:
    """The torn commits among the losses and the records out of order, when there are any."""
    said = ""
    torn = _counted(v, "torn_commits")
    if torn:
        said += (
            f" **{ui.count(torn)}** of the lost records are torn commits: their sink copy "
            "exists only in aborted transactions, yet the claim moved past them (a "
            "transaction protocol failure)."
        )
    producer, sink = _counted(v, "producer_out_of_order"), _counted(v, "sink_out_of_order")
    if producer or sink:
        said += (
            f" Order, beside the verdict: **{ui.count(producer)}** source records behind a "
            f"higher dgm-seq of their producer session, **{ui.count(sink)}** sink records "
            "behind a higher offset of their source partition."
        )
    return said


def _details(rows: pd.DataFrame, stale: bool) -> None:
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


def _one_in(v: pd.Series) -> int:
    """1 in how many ids the pipeline's counts keep (1 for a publication without samples;
    docs/design.md, "Sampled pipelines")."""
    one_in = v.get("sample_one_in")
    return 1 if one_in is None or pd.isna(one_in) else int(one_in)


def _kept(v: pd.Series) -> str:
    one_in = _one_in(v)
    return "" if one_in == 1 else f", counted over 1 in {one_in} message ids (95% interval)"


def _sampled(v: pd.Series) -> str:
    one_in = _one_in(v)
    if one_in == 1:
        return ""
    return (
        f" **Sampled**: the counts are those of 1 in {one_in:,} message ids, kept by their "
        f"hash; the rates are estimates, with 95% intervals: duplicate rate "
        f"{_interval(v, 'duplicate_rate')}, loss rate {_interval(v, 'loss_rate')}. Sequence "
        "gaps and order are not looked for."
    )


def _interval(v: pd.Series, rate: str) -> str:
    low, high = v.get(f"{rate}_low"), v.get(f"{rate}_high")
    return f"{ui.rate(low)} to {ui.rate(high)}"


def _topics(value: Any) -> list[str]:
    return [] if value is None else [str(t) for t in value]


def _card(v: pd.Series, windows: pd.DataFrame, stale: bool) -> None:
    sources, sinks = _topics(v["source_topics"]), _topics(v["sink"])
    with st.container(border=True):
        head, badge = st.columns([3, 2], vertical_alignment="center")
        head.subheader(str(v["pipeline"]), anchor=False)
        with badge:
            ui.verdict_badge(v["meets_declared"], str(v["achieved"]), stale)
        st.markdown(f"Declared **{v['declared']}** · achieved **{v['achieved']}**" + _clusters(v))
        cells = st.columns(5)
        cells[0].metric(
            "Duplicate rate",
            ui.rate(v["duplicate_rate"]),
            help=f"{ui.count(v['duplicate_copies'])} extra copies / "
            f"{ui.count(v['distinct_ids'])} distinct ids in the sink" + _kept(v),
        )
        cells[1].metric(
            "Loss rate",
            ui.rate(v["loss_rate"]),
            help=f"{ui.count(v['lost'])} lost / {ui.count(v['records_checked'])} records checked"
            + _kept(v),
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
        evidence = str(v["evidence"]) if pd.notna(v["evidence"]) else Evidence.NONE.value
        st.markdown(
            EVIDENCE.get(evidence, "**Evidence**: {evidence}").format(
                faults=ui.count(v["faults_observed"]),
                checked=ui.count(v["records_checked"]),
                evidence=evidence,
            )
            + (f" Claim: **{claim_text(v)}**." if claim_text(v) else "")
            + _late(v)
            + _torn_and_order(v)
            + _sampled(v)
        )
        _stages(v)
        _integrity(v)
        if v["why_not_judged"]:
            st.warning(f"**Not judged**: {v['why_not_judged']}.", icon=":material/hourglass_top:")
        if pd.notna(v["holds_since"]):
            st.caption(
                f"Each window's own verdict has been **{v['window_verdict']}** since "
                f"{ui.when(v['holds_since'])}."
            )
        trend = windows
        if not trend.empty:
            st.caption(f"Duplicate (orange) and loss (red) rate per window, {within_label()}")
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


def _integrity(v: pd.Series) -> None:
    """The truncations of its topics, when there are any (the topic pages list them)."""
    truncated, inconsistent = (
        int(v[c]) if c in v and pd.notna(v[c]) else 0
        for c in ("truncated_records", "inconsistent_offsets")
    )
    if truncated or inconsistent:
        st.error(
            f"**Log integrity**: {ui.count(truncated)} truncated records (Jepsen: lost-write) "
            f"and {ui.count(inconsistent)} inconsistent offsets (Jepsen: inconsistent-offsets) "
            "in its topics: a log was truncated and its offsets reused. The topic pages list "
            "them.",
            icon=":material/content_cut:",
        )


def _clusters(v: pd.Series) -> str:
    """Where the source and the sink live, once a pipeline leaves the default cluster
    (docs/design.md, "Several clusters"); nothing for a single-cluster setup."""
    source, sink = v.get("source_cluster"), v.get("sink_cluster")
    known = [c for c in (source, sink) if c is not None and not pd.isna(c)]
    if all(c == DEFAULT_CLUSTER for c in known):
        return ""
    return f" · cluster **{source}** → **{sink}**"


def _stages(v: pd.Series) -> None:
    """The producer stage and the end-to-end semantic beside the pipeline's own verdict."""
    producer = v.get("producer_achieved")
    if producer is None or pd.isna(producer):
        return
    chain = " → ".join(_topics(v.get("chain"))) or str(v["pipeline"])
    st.markdown(
        f"**Producer stage**: {producer} ({ui.rate(v['producer_duplicate_rate'])} extra copies "
        f"already in the source, {ui.count(v['producer_sequence_gaps'])} records missing from "
        f"its producers' sequences) · **end to end** ({chain}): {v['end_to_end_achieved']}"
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


def _missing_permissions() -> None:
    """What the collectors or the audit were refused: every verdict that needs it is weaker."""
    missing = queries.missing_permissions()
    if missing.empty:
        return
    lines = "\n".join(
        f"- {row.detail}" + (f" (pipelines: {row.pipelines})" if pd.notna(row.pipelines) else "")
        for row in missing.itertuples()
    )
    st.error(
        f"**dgm is refused what it needs to see** (docs/configuration.md, Permissions):\n\n"
        f"{lines}\n\n`dgm check` tries every permission and prints the fix.",
        icon=":material/lock:",
    )


def render() -> None:
    if "topic" in st.query_params:  # a shared `/?topic=NAME` link means the drill-down
        st.switch_page(TOPIC_PAGE, query_params={"topic": st.query_params["topic"]})
    st.title("Delivery guarantees")
    stale = ui.stale_banner()
    _missing_permissions()
    watch_view.seen_duplicates()
    st.header("Pipelines", anchor=False)
    rows = _table(stale)
    _details(rows, stale)
    if not rows.empty:
        st.header("Verdict history", anchor=False)
        within = timerange.current()
        st.caption(f"When each pipeline's achieved semantic changed, {within.label}.")
        st.plotly_chart(
            charts.verdict_timeline(pipeline_queries.verdict_segments(within)), key="history"
        )
    st.header("Cluster", anchor=False)
    _cluster()


ui.run_page(render, "overview")
