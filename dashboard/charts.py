"""Plotly figures over the published tables (frames as dashboard.queries returns them)."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from dgm.contracts.vocabulary import Achieved, DuplicateCause

RED, GREEN, GREY, BLUE, ORANGE = "#d62728", "#2ca02c", "#7f7f7f", "#1f77b4", "#ff7f0e"
_MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}


def _empty(title: str, why: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=why, showarrow=False, font={"color": GREY})
    fig.update_layout(
        title=title, height=220, margin=_MARGIN, xaxis_visible=False, yaxis_visible=False
    )
    return fig


def sparkline(windows: pd.DataFrame) -> go.Figure:
    """Duplicate and loss rate per window of one pipeline, small and without axes."""
    fig = go.Figure()
    for column, name, color in (
        ("duplicate_rate", "duplicate rate", ORANGE),
        ("loss_rate", "loss rate", RED),
    ):
        fig.add_trace(
            go.Scatter(
                x=windows["window_start"],
                y=windows[column].astype(float),
                mode="lines",
                name=name,
                line={"color": color, "width": 1.5},
                hovertemplate=f"%{{x|%H:%M}}: %{{y:.3%}}<extra>{name}</extra>",
            )
        )
    fig.update_layout(
        height=70,
        margin={"l": 0, "r": 0, "t": 0, "b": 0},
        showlegend=False,
        xaxis_visible=False,
        yaxis_visible=False,
        yaxis_rangemode="tozero",
    )
    return fig


def rates_over_time(topic: pd.DataFrame, loss: pd.DataFrame) -> go.Figure:
    """The topic's duplicate rate per window, and the loss rate of pipelines reading it."""
    title = "Duplicate and loss rate per window"
    if topic.empty and loss.empty:
        return _empty(title, "no windows published for this topic")
    fig = go.Figure()
    if not topic.empty:
        fig.add_trace(
            go.Scatter(
                x=topic["window_start"],
                y=topic["duplicate_rate"].astype(float),
                mode="lines+markers",
                name="duplicate rate (topic)",
                line={"color": ORANGE},
            )
        )
    for pipeline, rows in loss.groupby("pipeline"):
        fig.add_trace(
            go.Scatter(
                x=rows["window_start"],
                y=rows["loss_rate"].astype(float),
                mode="lines+markers",
                name=f"loss rate ({pipeline})",
                line={"color": RED, "dash": "dot"},
            )
        )
    fig.update_layout(
        title=title,
        height=300,
        margin=_MARGIN,
        yaxis_tickformat=".2%",
        yaxis_rangemode="tozero",
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def partition_heatmap(windows: pd.DataFrame, value: str) -> go.Figure:
    """Partitions x windows, colored by `value` (duplicate_copies, aborted or records)."""
    title = f"{value.replace('_', ' ')} per partition and window"
    if windows.empty:
        return _empty(title, "no partition windows published for this topic")
    grid = windows.pivot_table(
        index="partition", columns="window_start", values=value, aggfunc="sum", fill_value=0
    )
    fig = go.Figure(
        go.Heatmap(
            z=grid.to_numpy(dtype=float),
            x=list(grid.columns),
            y=[f"p{p}" for p in grid.index],
            colorscale="Reds",
            hovertemplate="%{y} %{x|%H:%M}: %{z}<extra></extra>",
        )
    )
    fig.update_layout(title=title, height=min(120 + 28 * len(grid.index), 900), margin=_MARGIN)
    return fig


def lso_lag(offsets: pd.DataFrame) -> go.Figure:
    """LSO lag (high watermark - LSO) per partition over time."""
    title = "LSO lag per partition (high watermark - LSO)"
    if offsets.empty:
        return _empty(title, "no offsets samples for this topic")
    frame = offsets.assign(p=offsets["partition"].map(lambda p: f"p{p}"))
    fig = px.line(frame, x="sampled_at", y="lso_lag", color="p", markers=True, title=title)
    fig.update_layout(height=300, margin=_MARGIN, yaxis_title="offsets", legend_title="")
    return fig


def lag_both_ways(latest: pd.DataFrame) -> go.Figure:
    """Per partition at the newest sample: lag from the high watermark next to lag from the LSO."""
    title = "Lag per partition: from the high watermark vs from the LSO"
    if latest.empty:
        return _empty(title, "no committed offsets sampled for this group")
    labels = [f"{t}/{p}" for t, p in zip(latest["topic"], latest["partition"], strict=True)]
    fig = go.Figure(
        [
            go.Bar(
                name="lag from HW (what other tools show)",
                x=labels,
                y=latest["lag_from_hw"].astype(float),
                marker_color=GREY,
            ),
            go.Bar(
                name="lag from LSO (transaction-correct)",
                x=labels,
                y=latest["lag_from_lso"].astype(float),
                marker_color=BLUE,
            ),
        ]
    )
    fig.update_layout(
        title=title,
        barmode="group",
        height=320,
        margin=_MARGIN,
        yaxis_title="records",
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


# Bucket 0 of the latency histogram: both arrivals interpolated inside one sampling interval,
# so no latency is told apart from zero there (docs/design.md, "Delivery latency").
UNDER_RESOLUTION = "under the arrivals' resolution"


def latency_histogram(buckets: pd.DataFrame) -> go.Figure:
    """Checked records per delivery-latency bucket (log scale, 4 buckets a doubling): the
    distribution that quantiles alone hide."""
    title = "Delivery latency: checked records per bucket"
    if buckets.empty:
        return _empty(title, "no delivery latency measured in this range")
    low = buckets["low_s"].clip(lower=buckets["high_s"] / 2**0.25)  # bucket 0 starts at 0
    middle = (low * buckets["high_s"]) ** 0.5
    spans = pd.Series(
        [f"{lo:.3g}-{hi:.3g} s" for lo, hi in zip(low, buckets["high_s"], strict=True)],
        index=buckets.index,
    )
    under = buckets["low_s"] == 0
    shown = ((under, GREY, UNDER_RESOLUTION), (~under, BLUE, "records"))
    fig = go.Figure(
        [
            go.Bar(
                x=middle[mask],
                y=buckets["records"][mask],
                width=(buckets["high_s"] - low)[mask],
                marker_color=colour,
                customdata=[name] * int(mask.sum()) if colour == GREY else list(spans[mask]),
                hovertemplate="%{customdata}: %{y} records<extra></extra>",
                name=name,
            )
            for mask, colour, name in shown
            if mask.any()
        ]
    )
    fig.update_layout(
        title=title, height=260, margin=_MARGIN, xaxis_type="log", xaxis_title="s",
        yaxis_title="records", showlegend=bool(under.any()),
    )  # fmt: skip
    return fig


def lag_seconds_over_time(lag: pd.DataFrame) -> go.Figure:
    """A group's lag in seconds over time: its oldest uncommitted record's age at each sample."""
    title = "Lag in seconds over time"
    known = lag[lag["lag_s"].notna()] if "lag_s" in lag else lag.iloc[0:0]
    if known.empty:
        return _empty(title, "no lag in seconds known for this group yet")
    oldest = known.groupby("sampled_at")["lag_s"].max().reset_index()
    fig = go.Figure(
        [
            go.Scatter(
                x=oldest["sampled_at"], y=oldest["lag_s"], name="seconds", line={"color": BLUE}
            )
        ]
    )
    fig.update_layout(
        title=title, height=260, margin=_MARGIN, yaxis_rangemode="tozero", yaxis_title="s"
    )
    return fig


def lag_over_time(lag: pd.DataFrame) -> go.Figure:
    """A group's total lag over time, both ways."""
    title = "Total lag over time"
    if lag.empty:
        return _empty(title, "no committed offsets sampled for this group")
    total = lag.groupby("sampled_at")[["lag_from_hw", "lag_from_lso"]].sum().reset_index()
    fig = go.Figure(
        [
            go.Scatter(
                x=total["sampled_at"],
                y=total["lag_from_hw"].astype(float),
                name="from HW",
                line={"color": GREY},
            ),
            go.Scatter(
                x=total["sampled_at"],
                y=total["lag_from_lso"].astype(float),
                name="from LSO",
                line={"color": BLUE},
            ),
        ]
    )
    fig.update_layout(title=title, height=280, margin=_MARGIN, yaxis_rangemode="tozero")
    return fig


def faults_timeline(faults: pd.DataFrame) -> go.Figure:
    """One marker per fault, one row per kind of event."""
    title = "Rebalances, member changes and other faults"
    if faults.empty:
        return _empty(title, "no faults observed")
    frame = faults.assign(who=faults["group_id"].fillna(faults["pipeline"]).fillna("cluster"))
    fig = px.scatter(frame, x="at", y="event", color="who", hover_data=["detail"], title=title)
    fig.update_traces(marker={"size": 12, "symbol": "diamond"})
    fig.update_layout(
        height=120 + 30 * frame["event"].nunique(), margin=_MARGIN, legend_title="", yaxis_title=""
    )
    return fig


# Verdict colors: the strongest guarantee green, weaker ones warmer, unjudged grey. Keyed by
# the words' plain text (.value), as the figures' JSON carries them.
VERDICT_COLORS = {
    Achieved.EXACTLY_ONCE.value: GREEN,
    Achieved.AT_LEAST_ONCE.value: ORANGE,
    Achieved.AT_MOST_ONCE.value: "#e377c2",
    Achieved.NO_GUARANTEE.value: RED,
    Achieved.INSUFFICIENT_EVIDENCE.value: GREY,
}
CAUSE_COLORS = {
    DuplicateCause.REPROCESSING.value: ORANGE,
    DuplicateCause.PRODUCER_RETRY.value: BLUE,
    DuplicateCause.ABORTED_READ.value: RED,
    DuplicateCause.UPSTREAM.value: "#9467bd",
    DuplicateCause.UNKNOWN.value: GREY,
}


def verdict_timeline(segments: pd.DataFrame) -> go.Figure:
    """One row per pipeline, one bar per run of windows with the same verdict: where the
    color changes, the pipeline's achieved semantic changed."""
    title = "Verdict history (each window's own verdict)"  # only when empty: the page heads it
    if segments.empty:
        return _empty(title, "no pipeline windows in this time range")
    fig = px.timeline(
        segments,
        x_start="start",
        x_end="finish",
        y="pipeline",
        color="achieved",
        color_discrete_map=VERDICT_COLORS,
        category_orders={"achieved": list(VERDICT_COLORS)},
        hover_data={"windows": True, "pipeline": False},
    )
    fig.update_yaxes(autorange="reversed", title="")
    pipelines = segments["pipeline"].nunique()
    fig.update_layout(
        height=min(140 + 24 * pipelines, 2600),
        margin=_MARGIN,
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "title": ""},
    )
    return fig


def duplicates_by_cause(by_cause: pd.DataFrame) -> go.Figure:
    """Extra copies per window, stacked by cause."""
    title = "Extra copies per window, by cause"
    if by_cause.empty:
        return _empty(title, "no extra copies in this time range")
    fig = px.bar(
        by_cause,
        x="window_start",
        y="extra_copies",
        color="cause",
        color_discrete_map=CAUSE_COLORS,
        title=title,
    )
    fig.update_layout(
        barmode="stack",
        height=300,
        margin=_MARGIN,
        yaxis_title="extra copies",
        xaxis_title="",
        legend={"orientation": "h", "y": -0.2, "title": ""},
    )
    return fig
