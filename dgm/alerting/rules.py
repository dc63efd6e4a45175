"""What an alert rule says: validation for the dashboard, matching, comparison, and merging.

The rule itself is `dgm.config.alerts.AlertRule` (declared as [[alerts]] in dgm.toml, checked
by the config loader); rules added on the dashboard's Alerts page go through `validate_rule`,
which reports every problem at once, each naming the rule and the field.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any, Literal, get_type_hints

from dgm.config.alerts import (
    AlertRule,
    split_scope,
)
from dgm.config.loader import field_value
from dgm.config.problems import Problem

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
}


def validate_rule(values: Mapping[str, object]) -> AlertRule | list[Problem]:
    """The rule `values` describe (keys as in [[alerts]]), or every (field, message) problem.

    Numbers may be given as numbers or as text ("0.01"); absent optional keys take their
    defaults. Messages name the rule (when it has a name) and the field's key is the first item.
    """
    name = values.get("name")
    rule = f"rule {name!r}: " if isinstance(name, str) and name else ""
    fields = {f.name: f for f in dataclasses.fields(AlertRule)}
    problems: list[Problem] = [
        (key, f"{rule}unknown key (expected one of {', '.join(sorted(fields))})")
        for key in values
        if key not in fields
    ]
    problems += [
        (key, f"{rule}missing required key")
        for key, declared in fields.items()
        if key not in values and declared.default is dataclasses.MISSING
    ]
    converted: dict[str, Any] = {}
    for key in fields.keys() & values.keys():
        try:
            converted[key] = field_value(AlertRule, key, _form_value(key, values[key]))
        except ValueError as error:
            problems.append((key, f"{rule}{error}"))
    if problems:
        return sorted(problems, key=lambda problem: _ORDER.get(problem[0], -1))
    checked = AlertRule(**converted)
    return list(checked.problems()) or checked


# Problems in the order of the rule's fields, unknown keys first.
_ORDER = {f.name: index for index, f in enumerate(dataclasses.fields(AlertRule))}


def _form_value(key: str, value: object) -> object:
    """A form's text for a number field that reads as a finite number ("0.01") as that
    number; anything else as it is, for the loader's walker to accept or refuse."""
    if not isinstance(value, str) or get_type_hints(AlertRule)[key] is not float:
        return value
    try:
        number = float(value.strip())
    except ValueError:
        return value
    return number if math.isfinite(number) else value


def rule_to_dict(rule: AlertRule) -> dict[str, object]:
    """The rule as [[alerts]] keys; `validate_rule` of it gives the rule back."""
    return dataclasses.asdict(rule)


def scope_kind(rule: AlertRule) -> str:
    """pipeline, topic, group or run: what the rule's subjects are."""
    return split_scope(rule.scope, rule.metric)[0]


def matches(rule: AlertRule, subject: str) -> bool:
    """True when `subject` (a pipeline, topic or group name) is within the rule's scope."""
    return fnmatchcase(subject, split_scope(rule.scope, rule.metric)[1])


def holds(rule: AlertRule, value: float | None) -> bool:
    """True when `value comparison threshold`; a missing value (no data) never holds."""
    return value is not None and _COMPARE[rule.comparison](value, rule.threshold)


def merge_rules(
    file_rules: Iterable[AlertRule], page_rules: Iterable[AlertRule], file: str
) -> tuple[tuple[AlertRule, ...], list[str]]:
    """The rules in effect: dgm.toml's, then the page's; and one error per name clash.

    A page rule whose name a dgm.toml rule already has is left out (the file wins) and the
    clash is reported naming both, so the caller can refuse or log it.
    """
    merged = list(file_rules)
    from_file = {rule.name: index for index, rule in enumerate(merged)}
    errors: list[str] = []
    for rule in page_rules:
        if rule.name in from_file:
            errors.append(
                f"alert rule name {rule.name!r} is used twice: by {file} alerts"
                f"[{from_file[rule.name]}] and by a rule added on the dashboard's Alerts page "
                "(rename or delete one of them)"
            )
        else:
            merged.append(rule)
    return tuple(merged), errors


# The states an evaluation (alerts.evaluate) leaves and the store keeps.
# (rule name, subject)
StateKey = tuple[str, str]


@dataclass(frozen=True)
class AlertState:
    """A (rule, subject) whose condition holds: pending until for_s has passed, then firing."""

    rule: str
    subject: str
    status: Literal["pending", "firing"]
    # When the condition began to hold (without interruption).
    since: datetime
    # The value at the last evaluation.
    value: float | None
    # When it fired, and when it last notified that it fires; None while pending.
    fired_at: datetime | None = None
    notified_at: datetime | None = None


@dataclass(frozen=True)
class Notification:
    """One thing to tell: a rule fires (again, if `repeat`) or resolved for a subject."""

    rule: AlertRule
    subject: str
    state: Literal["firing", "resolved"]
    value: float | None
    at: datetime
    repeat: bool = False


@dataclass(frozen=True)
class Evaluation:
    # Every pending and firing (rule, subject); the others are ok.
    states: dict[StateKey, AlertState]
    notifications: tuple[Notification, ...]
