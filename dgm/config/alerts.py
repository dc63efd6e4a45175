"""[[alerts]] and [alerts_webhook]: alert rules as dgm.toml declares them, and where they are
sent."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from dgm.alerting.metrics import ALERT_METRICS
from dgm.config.problems import Problem

# An HTTP header name (RFC 9110 token, without the rarely used punctuation).
_HEADER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


ALERT_COMPARISONS = (">", ">=", "<", "<=", "==")
ALERT_WINDOWS = ("cumulative", "latest")
ALERT_SEVERITIES = ("info", "warning", "critical")
_SCOPE_KINDS = ("pipeline", "topic", "group", "run")


def split_scope(scope: str, metric: str) -> tuple[str, str]:
    """(kind, fnmatch pattern) of a rule's scope: 'topic:orders-*' names the kind; a bare
    pattern ('orders-*') means the metric's first kind. A name containing ':' needs the kind."""
    kind, colon, pattern = scope.partition(":")
    if colon and kind in _SCOPE_KINDS:
        return kind, pattern
    return ALERT_METRICS.get(metric, ("pipeline",))[0], scope


def _scope_problems(scope: str, metric: str) -> Iterator[str]:
    kind, colon, _ = scope.partition(":")
    if colon and kind not in _SCOPE_KINDS:
        yield f"unknown scope kind {kind!r} (expected {', '.join(_SCOPE_KINDS)})"
        return
    kind, pattern = split_scope(scope, metric)
    if not pattern or pattern != pattern.strip() or not pattern.isprintable():
        yield f"expected an fnmatch pattern like 'orders-*', got {pattern!r}"
    elif pattern.count("[") != pattern.count("]") or "[]" in pattern:
        yield f"expected balanced [...] in the pattern, got {pattern!r}"
    elif kind == "run" and pattern != "*":
        yield f"a run-wide metric has one subject: expected '*', got {pattern!r}"
    if metric in ALERT_METRICS and kind not in ALERT_METRICS[metric]:
        fits = " or ".join(ALERT_METRICS[metric])
        yield f"metric {metric!r} is measured per {fits}, not per {kind}"


@dataclass(frozen=True, kw_only=True)  # kw_only: a required field follows a defaulted one
class AlertRule:
    """One [[alerts]] rule: fire when `metric` `comparison` `threshold` holds for `for_s`."""

    # Unique across dgm.toml's rules and the rules added on the dashboard's Alerts page.
    name: str
    # One of ALERT_METRICS: duplicate_rate, loss_rate, lost, aborted_reads, verdict_violates
    # (1 when a pipeline's verdict does not meet its declared semantic), lso_lag (records),
    # lso_stuck_s, hanging_transactions (count), consumer_lag_from_lso (records), lag_seconds
    # (the age of the oldest record a group has not committed), group_status
    # (the group's worst partition status by severity: 0 OK, 1 WARN, 2 STALL, 3 STOP, 4 ERR,
    # 5 REWIND), staleness_s (seconds since the newest sample the published analysis read).
    metric: str
    # Which subjects: an fnmatch pattern over pipeline, topic or group names, optionally
    # prefixed by its kind ('topic:orders-*'); a bare pattern means the metric's own kind.
    scope: str = "*"
    # >, >=, <, <= or ==; the rule holds when `value comparison threshold`.
    comparison: str = ">"
    threshold: float
    # cumulative: totals over the retention; latest: the newest window (pipeline and topic
    # rates and counts only; offsets, lag and transactions are always the latest sample).
    window: str = "cumulative"
    # Seconds the condition must hold before the rule fires; >= 0.
    for_s: float = 0.0
    # info, warning or critical.
    severity: str = "warning"
    # Seconds between repeated notifications while the rule keeps firing; 0 = never repeat.
    renotify_s: float = 0.0

    def problems(self) -> Iterator[Problem]:
        rule = f"rule {self.name!r}"
        if not self.name.strip() or self.name != self.name.strip() or len(self.name) > 100:
            yield "name", f"expected a name of 1 to 100 characters, got {self.name!r}"
        if self.metric not in ALERT_METRICS:
            close = difflib.get_close_matches(self.metric, ALERT_METRICS, n=1)
            known = "expected one of " + ", ".join(ALERT_METRICS)
            hint = f"did you mean {close[0]!r}?" if close else known
            yield "metric", f"{rule}: unknown metric {self.metric!r} ({hint})"
        for problem in _scope_problems(self.scope, self.metric):
            yield "scope", f"{rule}: {problem}"
        for key, allowed in (
            ("comparison", ALERT_COMPARISONS),
            ("window", ALERT_WINDOWS),
            ("severity", ALERT_SEVERITIES),
        ):
            if getattr(self, key) not in allowed:
                expected = ", ".join(repr(a) for a in allowed)
                yield key, f"{rule}: expected one of {expected}, got {getattr(self, key)!r}"
        if not math.isfinite(self.threshold):
            yield "threshold", f"{rule}: expected a finite number, got {self.threshold!r}"
        for key in ("for_s", "renotify_s"):
            value = getattr(self, key)
            if not (math.isfinite(value) and value >= 0):
                yield key, f"{rule}: expected a number of seconds >= 0, got {value!r}"


WebhookFormat = Literal["json", "slack", "alertmanager"]


@dataclass(frozen=True)
class AlertWebhook:
    """[alerts_webhook]: where alert notifications are POSTed as JSON, besides the log line."""

    # http:// or https:// URL; "" sends log lines only. Never logged or shown in repr (it may
    # hold a token).
    url: str = field(default="", repr=False)
    # Base URL of the dashboard, for the link each notification carries.
    dashboard_url: str = "http://localhost:8501"
    # Seconds one POST may take; > 0. A failed POST is retried on later evaluations.
    timeout_s: float = 5.0
    # The body: json (dgm's fields plus a one-line `text`), slack (Slack/Mattermost incoming
    # webhook: `text` and one attachment) or alertmanager (Alertmanager's v2 API, POST
    # /api/v2/alerts: a list of one alert, endsAt set on resolution).
    format: WebhookFormat = "json"
    # HTTP headers sent with every POST (e.g. Authorization = "Bearer ${TOKEN}"). Values are
    # never logged, stored or shown in repr or errors.
    headers: dict[str, str] = field(default_factory=dict, repr=False)

    def problems(self) -> Iterator[Problem]:
        for key in ("url", "dashboard_url"):
            value = getattr(self, key)
            if value and not value.startswith(("http://", "https://")):
                yield key, "expected an http:// or https:// URL"
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            yield "timeout_s", f"expected a number of seconds > 0, got {self.timeout_s!r}"
        for name, value in self.headers.items():
            if not _HEADER_NAME.fullmatch(name):
                yield f"headers.{name}", "expected an HTTP header name (letters, digits, '-')"
            elif any(c in value for c in "\r\n\0"):  # the value itself is never echoed
                yield f"headers.{name}", "expected a value without line breaks or NUL"
