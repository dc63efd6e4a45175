"""Alerts: what fires now, what fired, webhook deliveries that failed, the rules, a rule form.

Everything here comes from `<state_dir>/alerts.sqlite` (dgm/alerting/store.py): the analysis
evaluates the rules after every run and writes states, history and the webhook outbox there.
The page never evaluates; with `[dashboard] allow_edits = true` it adds and deletes page rules
(SQLite in WAL mode, apart from dgm.duckdb, so a rule can be added while an analysis runs);
without it (the default: the dashboard has no login) every rule is read-only here and the
page says how to turn the form on. dgm.duckdb is read only for the pipelines' sink topics
(links) and the freshness banner.
"""

from __future__ import annotations

import sqlite3

import streamlit as st

from dashboard import alerting, queries, ui
from dgm.alerting.metrics import ALERT_METRICS
from dgm.alerting.rules import merge_rules
from dgm.alerting.store import AlertStore, config_file
from dgm.config.alerts import ALERT_COMPARISONS, ALERT_SEVERITIES, ALERT_WINDOWS, AlertRule
from dgm.config.document import DgmConfig
from dgm.config.problems import ConfigError

KEYS = {field: f"alert-{field}" for field in (*alerting.FIELDS, "replace")}
# The form's initial values (and after a rule is stored).
DEFAULTS: dict[str, object] = {
    "name": "",
    "metric": next(iter(ALERT_METRICS)),
    "scope": "*",
    "comparison": ">",
    "threshold": "",
    "window": "cumulative",
    "for_s": 0.0,
    "severity": "warning",
    "renotify_s": 0.0,
    "replace": False,
}
RESULT = "alert-form-result"  # what the last submission did: ("error" | "success", text)
DELETED = "alert-deleted"
MAX_HISTORY = 500
MAX_DELIVERIES = 200
STATUS = {"firing": ":red[**FIRING**]", "pending": ":orange[**PENDING**]"}
HOW_TO_ADD = (
    "Add one with the form at the bottom of this page (stored in `alerts.sqlite`, evaluated "
    "after the next analysis run), or declare `[[alerts]]` in dgm.toml, for example:"
)
HOW_TO_DECLARE = "Declare `[[alerts]]` in dgm.toml, for example:"
EDITS_OFF = (
    "The form is off: set `allow_edits = true` under `[dashboard]` in `{file}` and reload this "
    "page. Do it only while the dashboard binds loopback or sits behind authentication "
    '(docs/operations.md, "The dashboard beyond loopback"): anyone who reaches it could add or '
    "delete rules."
)


def _retry(key: str) -> None:
    if st.button("Retry", key=f"retry-{key}", type="primary"):
        st.cache_data.clear()
        st.rerun()


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


def _analysis_banner() -> None:
    """Alerts judge the published analysis: say when there is none, or when it is STALE."""
    try:
        ui.stale_banner()
    except queries.NoDatabase:
        st.info(
            "**No analysis published yet**, so no rule has been evaluated: rules are "
            "evaluated after every `dgm analyze` run (run `dgm collect` and `dgm analyze`, or "
            "`dgm demo`). Rules added meanwhile are evaluated after the first run.",
            icon=":material/hourglass_empty:",
        )
    except queries.UnreadableDatabase as error:
        st.warning(
            f"The published analysis cannot be read (`{error}`); alerts below are from the "
            "last evaluation that could read it.",
            icon=":material/warning:",
        )


# --- active alerts --------------------------------------------------------------------------


def _active(found: list[alerting.Active], sinks: dict[str, list[str]]) -> None:
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


# --- deliveries, history --------------------------------------------------------------------


def _deliveries(store: AlertStore, config: DgmConfig) -> None:
    st.header("Notification deliveries", anchor=False)
    st.caption("Webhook notifications that failed or wait for a (re)try, then the delivered.")
    undelivered = store.deliveries(MAX_DELIVERIES, "pending") + store.deliveries(
        MAX_DELIVERIES, "failed"
    )
    if not config.alerts_webhook.url:
        st.caption(
            "No `[alerts_webhook] url` in dgm.toml: notifications go to the `dgm.alerts` log only."
        )
    if not undelivered:
        if config.alerts_webhook.url:
            st.success("Every webhook notification so far was delivered.")
        return
    failed = [d for d in undelivered if d.error]
    if failed:
        newest = max(failed, key=lambda d: d.id)
        st.error(
            f"**{len(failed)} webhook notification(s) failed** to reach the receiver; the "
            f"latest error: `{newest.error}`. Pending ones are retried after later analysis "
            "runs (with backoff), and given up after a day.",
            icon=":material/error:",
        )
    table = alerting.deliveries_table(undelivered)
    st.dataframe(table, hide_index=True, width="stretch")


def _delivered(store: AlertStore) -> None:
    delivered = store.deliveries(MAX_DELIVERIES, "delivered")
    if not delivered:
        return
    st.caption(f"Delivered to the webhook, newest first (the last {MAX_DELIVERIES} at most).")
    st.dataframe(alerting.delivered_table(delivered), hide_index=True, width="stretch")


def _received(store: AlertStore) -> None:
    """What a local receiver (`dgm demo`'s) got: the far end of the deliveries above."""
    received = store.received(MAX_DELIVERIES)
    if not received:
        return
    st.subheader("Received by the local webhook receiver", anchor=False)
    st.caption(
        f"{len(received)} notification(s) this state directory's receiver got (`dgm demo` "
        "runs one on 127.0.0.1 and sends its alerts there), newest first."
    )
    st.dataframe(alerting.received_table(received), hide_index=True, width="stretch")


def _history(store: AlertStore) -> None:
    st.header("History", anchor=False)
    entries = store.history(MAX_HISTORY)
    if not entries:
        st.caption("No rule has fired yet.")
        return
    st.caption(f"Every firing and resolution, newest first (the last {MAX_HISTORY} at most).")
    st.dataframe(alerting.history_table(entries), hide_index=True, width="stretch")


# --- rules ----------------------------------------------------------------------------------


def _delete(name: str) -> None:
    try:
        config = queries.config()
        if not config.dashboard.allow_edits:  # the button is not shown then; a stale page
            raise ConfigError("edits are off ([dashboard] allow_edits = false)")
        deleted = AlertStore(config.state_dir).delete_rule(name)
    except (ConfigError, sqlite3.Error) as error:
        st.session_state[DELETED] = ("error", f"Rule `{name}` was not deleted: {error}")
        return
    st.session_state[DELETED] = (
        ("success", f"Deleted rule `{name}`; its alerts end at the next evaluation.")
        if deleted
        else ("error", f"There is no page rule `{name}` any more.")
    )


def _rules(
    config: DgmConfig, page_rules: list[AlertRule], errors: list[str], in_effect: int
) -> None:
    st.header("Rules in effect", anchor=False)
    for message in errors:
        st.warning(message, icon=":material/warning:")
    if DELETED in st.session_state:
        kind, text = st.session_state.pop(DELETED)
        (st.success if kind == "success" else st.error)(text)
    edits = config.dashboard.allow_edits
    if not in_effect and not page_rules:
        how = HOW_TO_ADD if edits else HOW_TO_DECLARE
        st.info(f"**No alert rules yet.** {how}", icon=":material/notifications_off:")
        st.code(alerting.TOML_EXAMPLE, language="toml")
        return
    st.subheader(f"From {config_file(config)}", anchor=False)
    if config.alerts:
        st.caption(f"Read-only here: edit `{config_file(config)}` to change them.")
        st.dataframe(alerting.rules_table(config.alerts), hide_index=True, width="stretch")
    else:
        st.caption("None: the file declares no `[[alerts]]`.")
    st.subheader("Added on this page", anchor=False)
    if not page_rules:
        st.caption("None yet: use the form below." if edits else "None.")
        return
    st.dataframe(alerting.rules_table(page_rules), hide_index=True, width="stretch")
    if not edits:
        st.caption("Read-only: the form that adds and deletes them is off (below).")
        return
    for rule in page_rules:
        text, button = st.columns([5, 1], vertical_alignment="center")
        text.markdown(f"`{rule.name}`: {rule.metric} {alerting.condition(rule)} on `{rule.scope}`")
        button.button(
            "Delete",
            key=f"delete-{rule.name}",
            on_click=_delete,
            args=(rule.name,),
            icon=":material/delete:",
        )


def _live() -> None:
    config = queries.config()
    store = AlertStore(config.state_dir)
    try:
        # Reading creates nothing: without alerts.sqlite there are no page rules and no states.
        exists = store.path.exists()
        page_rules, errors = store.page_rules() if exists else ([], [])
        rules, clashes = merge_rules(config.alerts, page_rules, config_file(config))
        states = store.states() if exists else {}
        _analysis_banner()
        if rules or states:
            _active(alerting.active(states.values(), rules), _sinks())
        if exists:
            _history(store)
            _deliveries(store, config)
            _delivered(store)
            _received(store)
        _rules(config, page_rules, errors + clashes, len(rules))
    except sqlite3.Error as error:
        st.error(
            f"**`{store.path}` cannot be read**: {error}. An evaluation may hold it for longer "
            "than usual (press Retry), or it is damaged: moving it away starts afresh, without "
            "the page rules, alert states and history it holds.",
            icon=":material/error:",
        )
        _retry("alerts-store")


# --- the form -------------------------------------------------------------------------------


def _submit() -> None:
    """The form's on_click: runs before the page, so the rules listed above include a new one."""
    state = st.session_state
    values = alerting.form_values({field: state.get(KEYS[field]) for field in alerting.FIELDS})
    try:
        config = queries.config()
        if not config.dashboard.allow_edits:  # the form is not shown then; a stale page
            raise ConfigError("edits are off ([dashboard] allow_edits = false)")
        result = AlertStore(config.state_dir).add_rule(
            values, config.alerts, replace=bool(state.get(KEYS["replace"]))
        )
    except (ConfigError, sqlite3.Error) as error:
        state[RESULT] = ("error", f"**The rule was not stored**: {error}")
        return
    if isinstance(result, list):
        state[RESULT] = (
            "error",
            "**The rule was not stored**; fix these fields:\n\n" + alerting.problem_lines(result),
        )
        return
    state[RESULT] = (
        "success",
        f"Rule `{result.name}` is stored in `alerts.sqlite`. It will be evaluated after the "
        "next analysis run (`dgm analyze`); this page shows it when it fires.",
    )
    for field, value in DEFAULTS.items():  # a fresh form for the next rule
        state[KEYS[field]] = value


def _last_submission() -> None:
    """What the last press of Add rule did (set by _submit, shown once)."""
    if RESULT in st.session_state:
        kind, text = st.session_state.pop(RESULT)
        if kind == "success":
            st.success(text, icon=":material/check_circle:")
        else:
            st.error(text, icon=":material/error:")


def _form() -> None:
    st.header("Add a rule", anchor=False)
    st.caption(
        "Fires when *metric comparison threshold* holds for a subject for `for_s` seconds. "
        "Scope is an fnmatch pattern over the metric's subjects (`orders-*`), optionally with "
        "a kind: `topic:orders-*`, `pipeline:*`, `group:*`."
    )
    _last_submission()
    for field, value in DEFAULTS.items():  # set here, not as widget arguments: see _submit
        st.session_state.setdefault(KEYS[field], value)
    with st.form("add-alert-rule", border=True):
        first = st.columns(3)
        first[0].text_input("Name", key=KEYS["name"], placeholder="sink-duplicates")
        first[1].selectbox(
            "Metric", list(ALERT_METRICS), key=KEYS["metric"], format_func=alerting.metric_label
        )
        first[2].text_input(
            "Scope",
            key=KEYS["scope"],
            help="fnmatch pattern over pipeline, topic or group names, e.g. `orders-*` or "
            "`topic:payments-*`",
        )
        second = st.columns(3)
        second[0].selectbox("Comparison", ALERT_COMPARISONS, key=KEYS["comparison"])
        second[1].text_input(
            "Threshold",
            key=KEYS["threshold"],
            placeholder="0.001",
            help="A number; rates are fractions (0.001 = 0.1%), seconds for *_s metrics. "
            + "; ".join(f"{m}: {h}" for m, h in alerting.METRIC_HELP.items()),
        )
        second[2].selectbox(
            "Window",
            ALERT_WINDOWS,
            key=KEYS["window"],
            help="cumulative: totals over the retention; latest: the newest window",
        )
        third = st.columns(3)
        third[0].number_input(
            "For (s)",
            min_value=0.0,
            format="%g",
            step=60.0,
            key=KEYS["for_s"],
            help="How long the condition must hold before the rule fires",
        )
        third[1].selectbox(
            "Severity",
            ALERT_SEVERITIES,
            key=KEYS["severity"],
        )
        third[2].number_input(
            "Renotify every (s)",
            min_value=0.0,
            format="%g",
            step=300.0,
            key=KEYS["renotify_s"],
            help="Repeat the notification while the rule keeps firing; 0 = never",
        )
        st.checkbox("Replace the page rule of the same name", key=KEYS["replace"])
        st.form_submit_button("Add rule", type="primary", on_click=_submit)


def _page() -> None:
    st.title("Alerts")

    @st.fragment(run_every=ui.refresh_every())
    def live() -> None:
        ui.guarded(_live, "alerts")

    live()
    try:
        config = queries.config()
    except ConfigError:
        return  # the message and Retry are above; a rule needs a valid dgm.toml to be stored
    if config.dashboard.allow_edits:
        _form()
        return
    st.header("Add a rule", anchor=False)
    _last_submission()  # a form rendered before edits were turned off
    st.info(EDITS_OFF.format(file=config_file(config)), icon=":material/lock:")


_page()
