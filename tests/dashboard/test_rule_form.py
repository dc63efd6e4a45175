"""The Alerts page's rule form is derived from the rule (dashboard/rule_form.py): every field
of AlertRule, in order, with its default; a new field would appear without being restated."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from dashboard import rule_form
from dgm.alerting.metrics import ALERT_METRICS
from dgm.config.alerts import ALERT_SEVERITIES, AlertRule


def test_the_form_has_every_field_of_the_rule_in_order() -> None:
    assert [f.name for f in rule_form.FIELDS] == [f.name for f in dataclasses.fields(AlertRule)]


def test_a_fresh_form_holds_the_rules_defaults() -> None:
    defaults = {
        f.name: f.default
        for f in dataclasses.fields(AlertRule)
        if f.default is not dataclasses.MISSING
    }
    assert {k: rule_form.DEFAULTS[k] for k in defaults} == defaults
    assert rule_form.DEFAULTS["name"] == ""  # required text: typed in
    assert rule_form.DEFAULTS["threshold"] == ""  # a required number is typed as text
    assert rule_form.DEFAULTS["metric"] == next(iter(ALERT_METRICS))  # the first choice


def test_fields_are_picked_typed_or_numbers_as_the_rule_says() -> None:
    by_name = {f.name: f for f in rule_form.FIELDS}
    assert by_name["severity"].choices == ALERT_SEVERITIES
    assert by_name["metric"].choices == tuple(ALERT_METRICS)
    assert by_name["for_s"].number and by_name["for_s"].minimum == 0.0
    assert by_name["for_s"].label == "For (s)"
    assert by_name["threshold"].text and by_name["scope"].text


def test_a_new_field_of_the_rule_appears_with_its_default_and_choices() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Rule:
        name: str
        mode: Literal["fast", "slow"] = "slow"
        grace_s: float = 30.0

    name, mode, grace = rule_form.fields_of(Rule)
    assert (name.label, name.default, name.required, name.text) == ("Name", "", True, True)
    assert (mode.label, mode.choices, mode.default) == ("Mode", ("fast", "slow"), "slow")
    assert (grace.label, grace.number, grace.default, grace.minimum) == (
        "Grace (s)",
        True,
        30.0,
        0.0,
    )


def test_form_values_strip_text_and_an_empty_scope_is_every_subject() -> None:
    raw = {"name": " dups ", "scope": "  ", "threshold": " 0.1 ", "for_s": 0.0}
    values = rule_form.form_values(raw)
    assert values["name"] == "dups"
    assert values["scope"] == "*"
    assert values["threshold"] == "0.1"  # left as typed: validate_rule reads it
    assert values["metric"] is None  # no widget value: reported by validate_rule
    assert list(values) == [f.name for f in rule_form.FIELDS]
