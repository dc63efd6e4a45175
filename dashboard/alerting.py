"""What the Alerts page shows, apart from Streamlit: value formats, links, tables (the rule
form's fields and values: dashboard/rule_form.py).

The page reads `<state_dir>/alerts.sqlite` (dgm/alerting/store.py) and adds or deletes page rules
there; evaluation happens after every analysis run (alerts/run.py), never in the browser.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd

from dashboard import page_paths, ui
from dgm.alerting.rules import AlertState, scope_kind
from dgm.alerting.store import Delivery, HistoryEntry, Received
from dgm.config.alerts import AlertRule

RATES = ("duplicate_rate", "loss_rate")
SECONDS = ("lso_stuck_s", "staleness_s")
# What a rule in dgm.toml looks like (the empty state shows it).
TOML_EXAMPLE = """[[alerts]]
name = "sink-duplicates"
metric = "duplicate_rate"      # per pipeline or topic
scope = "topic:orders-*"       # fnmatch over names; 'topic:' / 'pipeline:' / 'group:' kinds
comparison = ">"
threshold = 0.001              # rates are fractions: 0.001 = 0.1%
window = "cumulative"          # or "latest" (the newest window)
for_s = 300                    # the condition must hold this long before it fires
severity = "critical"          # info, warning or critical
renotify_s = 3600              # repeat while firing; 0 = never

[alerts_webhook]               # optional: POST every firing and resolution as JSON
url = "https://hooks.example.com/dgm"
"""


def number(metric: str, value: float | None) -> str:
    """A metric's value as people read it: rates in %, seconds as a duration, else a number."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "no value"
    if metric in RATES:
        return ui.rate(value)
    if metric in SECONDS:
        return ui.duration_ms(value * 1000)
    if metric == "verdict_violates":
        return "violates" if value >= 1 else "meets"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4g}"


def condition(rule: AlertRule) -> str:
    """`> 0.100%`: when the rule holds."""
    return f"{rule.comparison} {number(rule.metric, rule.threshold)}"


@dataclass(frozen=True)
class Link:
    """Where the dashboard shows an alert's subject: a page (views/...) and its parameters."""

    page: str
    label: str
    query: tuple[tuple[str, str], ...] = ()


def links(kind: str, subject: str, sinks: Mapping[str, Sequence[str]]) -> list[Link]:
    """A topic's drill-down; a pipeline's sink topics' drill-downs (the overview when its sink
    is unknown); a group's Consumer groups page; the overview for run-wide metrics."""
    if kind == "topic":
        return [Link(page_paths.TOPIC, f"topic {subject}", (("topic", subject),))]
    if kind == "pipeline":
        topics = sinks.get(subject) or ()
        if topics:
            return [Link(page_paths.TOPIC, f"sink {t}", (("topic", t),)) for t in topics]
        return [Link(page_paths.OVERVIEW, f"pipeline {subject} (overview)")]
    if kind == "group":
        return [Link(page_paths.GROUPS, f"group {subject}", (("group", subject),))]
    return [Link(page_paths.OVERVIEW, "overview")]


@dataclass(frozen=True)
class Active:
    """A firing or pending (rule, subject), with its rule when the rule is still in effect."""

    state: AlertState
    rule: AlertRule | None

    @property
    def kind(self) -> str:
        return scope_kind(self.rule) if self.rule else "?"

    @property
    def severity(self) -> str:
        return self.rule.severity if self.rule else "?"


_SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}


def active(states: Iterable[AlertState], rules: Iterable[AlertRule]) -> list[Active]:
    """Firing before pending, then by severity (critical first), rule and subject."""
    by_name = {rule.name: rule for rule in rules}
    found = [Active(state, by_name.get(state.rule)) for state in states]
    return sorted(
        found,
        key=lambda a: (
            a.state.status != "firing",
            _SEVERITY_ORDER.get(a.severity, 3),
            a.state.rule,
            a.state.subject,
        ),
    )


def _at(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.astimezone(UTC)


def history_table(entries: Sequence[HistoryEntry]) -> pd.DataFrame:
    """Every firing and resolution, newest first (as the store returns them)."""
    return pd.DataFrame(
        {
            "at": [_at(e.at) for e in entries],
            "state": [e.state for e in entries],
            "rule": [e.rule for e in entries],
            "severity": [e.severity for e in entries],
            "subject": [e.subject for e in entries],
            "metric": [e.metric for e in entries],
            "value": [number(e.metric, e.value) for e in entries],
            "fires when": [f"{e.comparison} {number(e.metric, e.threshold)}" for e in entries],
        },
        columns=["at", "state", "rule", "severity", "subject", "metric", "value", "fires when"],
    )


def delivered_table(deliveries: Sequence[Delivery]) -> pd.DataFrame:
    """Webhook notifications the receiver accepted, newest first."""
    rows = sorted(deliveries, key=lambda d: d.id, reverse=True)
    return pd.DataFrame(
        {
            "delivered": [_at(d.delivered_at) for d in rows],
            "notification": [f"{d.state}: {d.rule} / {d.subject}" for d in rows],
            "tries": [d.attempts for d in rows],
            "created": [_at(d.created_at) for d in rows],
        },
        columns=["delivered", "notification", "tries", "created"],
    )


def _field(body: object, key: str) -> str:
    value = body.get(key) if isinstance(body, Mapping) else None
    return "" if value is None else str(value)


def received_table(received: Sequence[Received]) -> pd.DataFrame:
    """What a local webhook receiver got (dgm's JSON body), newest first."""
    return pd.DataFrame(
        {
            "received": [_at(r.at) for r in received],
            "state": [_field(r.body, "state") for r in received],
            "rule": [_field(r.body, "rule") for r in received],
            "subject": [_field(r.body, "subject") for r in received],
            "text": [_field(r.body, "text") or json.dumps(r.body)[:200] for r in received],
        },
        columns=["received", "state", "rule", "subject", "text"],
    )


def deliveries_table(deliveries: Sequence[Delivery]) -> pd.DataFrame:
    """Webhook notifications not delivered: failed (given up) or waiting for a (re)try."""
    rows = sorted(deliveries, key=lambda d: d.id, reverse=True)
    return pd.DataFrame(
        {
            "status": [
                "failed (given up)"
                if d.status == "failed"
                else "waiting for retry"
                if d.attempts
                else "queued"
                for d in rows
            ],
            "error": [d.error or "" for d in rows],
            "attempts": [d.attempts for d in rows],
            "next retry": [None if d.status == "failed" else _at(d.next_attempt_at) for d in rows],
            "last attempt": [_at(d.last_attempt_at) for d in rows],
            "notification": [f"{d.state}: {d.rule} / {d.subject}" for d in rows],
            "created": [_at(d.created_at) for d in rows],
        },
        columns=[
            "status",
            "error",
            "attempts",
            "next retry",
            "last attempt",
            "notification",
            "created",
        ],
    )


def rules_table(rules: Sequence[AlertRule]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "name": [r.name for r in rules],
            "metric": [r.metric for r in rules],
            "scope": [r.scope for r in rules],
            "fires when": [condition(r) for r in rules],
            "window": [r.window for r in rules],
            "for": [f"{r.for_s:g} s" for r in rules],
            "severity": [r.severity for r in rules],
            "renotify": [f"every {r.renotify_s:g} s" if r.renotify_s else "never" for r in rules],
        },
        columns=[
            "name",
            "metric",
            "scope",
            "fires when",
            "window",
            "for",
            "severity",
            "renotify",
        ],
    )
