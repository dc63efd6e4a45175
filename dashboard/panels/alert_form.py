"""The Alerts page's form that adds a rule, only with `[dashboard] allow_edits = true`: one
widget per field of the rule (dashboard/rule_form.py), three to a row; without edits, how to
turn it on."""

from __future__ import annotations

import sqlite3

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard import rule_form
from dashboard.rule_form import RuleField
from dgm.alerting.store import AlertStore, config_file
from dgm.config.document import DgmConfig
from dgm.config.problems import ConfigError

RESULT = "alert-form-result"  # what the last submission did: ("error" | "success", text)
REPLACE = "alert-replace"  # the form's one control that is no field of the rule
PER_ROW = 3
EDITS_OFF = (
    "The form is off: set `allow_edits = true` under `[dashboard]` in `{file}` and reload this "
    "page. Do it only while the dashboard binds loopback or sits behind authentication "
    '(docs/operations.md, "The dashboard beyond loopback"): anyone who reaches it could add or '
    "delete rules."
)


def _fresh() -> dict[str, object]:
    """A fresh form's widget values, by key."""
    return {field.key: field.default for field in rule_form.FIELDS} | {REPLACE: False}


def _submit() -> None:
    """The form's on_click: runs before the page, so the rules listed above include a new one."""
    state = st.session_state
    values = rule_form.form_values({f.name: state.get(f.key) for f in rule_form.FIELDS})
    try:
        config = rule_form.config_for_edits()
        result = AlertStore(config.state_dir).add_rule(
            values, config.alerts, replace=bool(state.get(REPLACE))
        )
    except (ConfigError, sqlite3.Error) as error:
        state[RESULT] = ("error", f"**The rule was not stored**: {error}")
        return
    if isinstance(result, list):
        state[RESULT] = (
            "error",
            "**The rule was not stored**; fix these fields:\n\n" + rule_form.problem_lines(result),
        )
        return
    state[RESULT] = (
        "success",
        f"Rule `{result.name}` is stored in `alerts.sqlite`. It will be evaluated after the "
        "next analysis run (`dgm analyze`); this page shows it when it fires.",
    )
    for key, value in _fresh().items():  # a fresh form for the next rule
        state[key] = value


def _last_submission() -> None:
    """What the last press of Add rule did (set by _submit, shown once)."""
    if RESULT in st.session_state:
        kind, text = st.session_state.pop(RESULT)
        if kind == "success":
            st.success(text, icon=":material/check_circle:")
        else:
            st.error(text, icon=":material/error:")


def _widget(cell: DeltaGenerator, field: RuleField) -> None:
    """The field's input: a pick list, a number input, or text."""
    words = field.words
    if field.choices:
        cell.selectbox(
            field.label,
            field.choices,
            key=field.key,
            format_func=words.describe or str,
            help=words.help,
        )
    elif field.number:
        cell.number_input(
            field.label,
            min_value=field.minimum,
            format="%g",
            step=words.step,
            key=field.key,
            help=words.help,
        )
    else:
        cell.text_input(field.label, key=field.key, placeholder=words.placeholder, help=words.help)


def _form() -> None:
    st.header("Add a rule", anchor=False)
    st.caption(
        "Fires when *metric comparison threshold* holds for a subject for `for_s` seconds. "
        "Scope is an fnmatch pattern over the metric's subjects (`orders-*`), optionally with "
        "a kind: `topic:orders-*`, `pipeline:*`, `group:*`."
    )
    _last_submission()
    for key, value in _fresh().items():  # set here, not as widget arguments: see _submit
        st.session_state.setdefault(key, value)
    fields = rule_form.FIELDS
    with st.form("add-alert-rule", border=True):
        for start in range(0, len(fields), PER_ROW):
            row = fields[start : start + PER_ROW]
            for cell, field in zip(st.columns(PER_ROW), row, strict=False):
                _widget(cell, field)
        st.checkbox("Replace the page rule of the same name", key=REPLACE)
        st.form_submit_button("Add rule", type="primary", on_click=_submit)


def render(config: DgmConfig) -> None:
    """The form when dgm.toml allows edits; else what the last submission did and how to turn
    the form on."""
    if config.dashboard.allow_edits:
        _form()
        return
    st.header("Add a rule", anchor=False)
    _last_submission()  # a form rendered before edits were turned off
    st.info(EDITS_OFF.format(file=config_file(config)), icon=":material/lock:")
