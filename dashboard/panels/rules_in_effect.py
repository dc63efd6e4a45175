"""The Alerts page's rules in effect: dgm.toml's (read-only here) and those added on the page,
each of these with a Delete button when edits are on."""

from __future__ import annotations

import sqlite3

import streamlit as st

from dashboard import alerting, rule_form
from dgm.alerting.store import AlertStore, config_file
from dgm.config.alerts import AlertRule
from dgm.config.document import DgmConfig
from dgm.config.problems import ConfigError

DELETED = "alert-deleted"  # what the last Delete did: ("error" | "success", text)
HOW_TO_ADD = (
    "Add one with the form at the bottom of this page (stored in `alerts.sqlite`, evaluated "
    "after the next analysis run), or declare `[[alerts]]` in dgm.toml, for example:"
)
HOW_TO_DECLARE = "Declare `[[alerts]]` in dgm.toml, for example:"


def _delete(name: str) -> None:
    """A Delete button's on_click: runs before the page, so the list no longer has the rule."""
    try:
        config = rule_form.config_for_edits()
        deleted = AlertStore(config.state_dir).delete_rule(name)
    except (ConfigError, sqlite3.Error) as error:
        st.session_state[DELETED] = ("error", f"Rule `{name}` was not deleted: {error}")
        return
    st.session_state[DELETED] = (
        ("success", f"Deleted rule `{name}`; its alerts end at the next evaluation.")
        if deleted
        else ("error", f"There is no page rule `{name}` any more.")
    )


def render(
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
