"""The Alerts page's active alerts: what fires or is pending at the last evaluation, each with
its value, condition and links to where the dashboard shows its subject."""

from __future__ import annotations

import streamlit as st

from dashboard import alerting, queries, ui

STATUS = {"firing": ":red[**FIRING**]", "pending": ":orange[**PENDING**]"}


def _sinks() -> dict[str, list[str]]:
    """pipeline -> its sink topics, from the published verdicts; {} without a readable file."""
    try:
        verdicts = queries.verdicts()
    except (queries.NoDatabase, queries.UnreadableDatabase):
        return {}
    return {
        str(pipeline): [str(t) for t in sink]
        for pipeline, sink in zip(verdicts["pipeline"], verdicts["sink"], strict=True)
        if sink is not None
    }


def render(found: list[alerting.Active]) -> None:
    sinks = _sinks()
    st.header("Active alerts", anchor=False)
    if not found:
        st.success(
            "Nothing is firing or pending at the last evaluation (rules are evaluated after "
            "every analysis run).",
            icon=":material/check_circle:",
        )
        return
    firing = sum(1 for a in found if a.state.status == "firing")
    st.markdown(f"**{firing} firing**, {len(found) - firing} pending")
    for item in found:
        _alert(item, sinks)


def _alert(item: alerting.Active, sinks: dict[str, list[str]]) -> None:
    state, rule = item.state, item.rule
    metric = rule.metric if rule else ""
    with st.container(border=True):
        text, where = st.columns([3, 1], vertical_alignment="center")
        since = state.fired_at if state.status == "firing" and state.fired_at else state.since
        when = (
            f"firing since {ui.when(since)}"
            if state.status == "firing"
            else f"holding since {ui.when(since)}; fires after {rule.for_s:g} s"
            if rule
            else f"holding since {ui.when(since)}"
        )
        threshold = f"fires when {alerting.condition(rule)}" if rule else "rule not in effect"
        text.markdown(
            f"{STATUS.get(state.status, state.status)} · **{item.severity}** · "
            f"rule `{state.rule}` · {item.kind} `{state.subject}`  \n"
            f"value **{alerting.number(metric, state.value)}** ({metric}; {threshold}) · "
            f"{when}"
        )
        with where:
            for link in alerting.links(item.kind, state.subject, sinks):
                st.page_link(
                    link.page,
                    label=link.label,
                    query_params=dict(link.query),
                    icon=":material/search:",
                )
