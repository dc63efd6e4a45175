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
from dashboard.panels import (
    active_alerts,
    alert_deliveries,
    alert_evaluation,
    alert_form,
    alert_history,
    rules_in_effect,
)
from dgm.alerting.rules import merge_rules
from dgm.alerting.store import AlertStore, config_file
from dgm.config.problems import ConfigError


def _live() -> None:
    config = queries.config()
    store = AlertStore(config.state_dir)
    try:
        # Reading creates nothing: without alerts.sqlite there are no page rules and no states.
        exists = store.path.exists()
        page_rules, errors = store.page_rules() if exists else ([], [])
        rules, clashes = merge_rules(config.alerts, page_rules, config_file(config))
        states = store.states() if exists else {}
        alert_evaluation.render()
        if rules or states:
            active_alerts.render(alerting.active(states.values(), rules))
        if exists:
            alert_history.render(store)
            alert_deliveries.render(store, config)
        rules_in_effect.render(config, page_rules, errors + clashes, len(rules))
    except sqlite3.Error as error:
        st.error(
            f"**`{store.path}` cannot be read**: {error}. An evaluation may hold it for longer "
            "than usual (press Retry), or it is damaged: moving it away starts afresh, without "
            "the page rules, alert states and history it holds.",
            icon=":material/error:",
        )
        ui.retry("alerts-store")


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
    alert_form.render(config)


_page()
