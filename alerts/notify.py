"""Tell people: a log line for every notification, and the webhook outbox delivered with retries.

Delivery never raises and never runs long: each POST has a timeout, a run stops at a time
budget, and every failure is recorded (with its error) for a retry with exponential backoff
on a later evaluation. Notifications go out in the order they were made; when the oldest
pending one fails, the ones behind it wait, so a receiver never sees a resolution before its
firing. The outbox keeps dgm's JSON body; the webhook's format (alerts.formats) and headers
are applied when sending. Neither the webhook URL nor a header value is ever logged or
recorded (they may carry a token).
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote, urlsplit

from alerts.formats import render, text_line
from dgm.alerting.rules import Notification, scope_kind
from dgm.alerting.store import AlertStore, Delivery
from dgm.config.alerts import AlertWebhook
from dgm.util.waiting import next_delay

log = logging.getLogger("dgm.alerts")

# Within one run: tries per notification, and the pause before each retry (seconds).
QUICK_TRIES = 3
QUICK_PAUSE_S = 0.2
# Across runs: first retry this long after a failed run, doubling, capped; given up after.
RETRY_FIRST_S = 30.0
RETRY_CAP_S = 3600.0
GIVE_UP_AFTER = timedelta(days=1)

# Dashboard page per scope kind, and its query parameter.
_PAGES = {
    "pipeline": ("overview", "pipeline"),
    "topic": ("topic", "topic"),
    "group": ("groups", "group"),
}


def link(
    dashboard_url: str, kind: str, subject: str, sinks: Mapping[str, str] | None = None
) -> str:
    """Where the dashboard shows the subject: /topic?topic=..., /groups?group=...; a pipeline's
    sink drill-down when `sinks` (pipeline -> sink topic) names it, else the overview."""
    base = dashboard_url.rstrip("/")
    if kind == "pipeline" and sinks and subject in sinks:
        return f"{base}/topic?topic={quote(sinks[subject], safe='')}"
    if kind not in _PAGES:
        return f"{base}/overview"
    page, parameter = _PAGES[kind]
    return f"{base}/{page}?{parameter}={quote(subject, safe='')}"


def payload(
    notification: Notification,
    dashboard_url: str,
    sinks: Mapping[str, str] | None = None,
    fired_at: datetime | None = None,
) -> dict[str, Any]:
    """The webhook's JSON body; `sinks` (pipeline -> sink topic) links pipelines to the
    drill-down of what they wrote; `fired_at` is when the (rule, subject) began firing."""
    rule = notification.rule
    body: dict[str, Any] = {
        "rule": rule.name,
        "severity": rule.severity,
        "metric": rule.metric,
        "scope": rule.scope,
        "subject": notification.subject,
        "value": notification.value,
        "threshold": rule.threshold,
        "comparison": rule.comparison,
        "state": notification.state,
        "at": notification.at.isoformat(),
        "link": link(dashboard_url, scope_kind(rule), notification.subject, sinks),
        "fired_at": fired_at.isoformat() if fired_at is not None else None,
    }
    return {**body, "text": text_line(body)}


def log_notification(notification: Notification) -> None:
    """One line on logger dgm.alerts: warnings for warning/critical firings, info otherwise."""
    rule = notification.rule
    firing = notification.state == "firing"
    level = logging.WARNING if firing and rule.severity != "info" else logging.INFO
    state = ("still firing" if notification.repeat else "firing") if firing else "resolved"
    log.log(
        level,
        "alert %s [%s] rule %r: %s of %s %s = %s (%s %s %g)",
        state,
        rule.severity,
        rule.name,
        rule.metric,
        scope_kind(rule),
        notification.subject,
        "no value" if notification.value is None else f"{notification.value:g}",
        "fires when" if firing else "threshold",
        rule.comparison,
        rule.threshold,
    )


def post(url: str, body: Any, timeout_s: float, headers: Mapping[str, str] | None = None) -> None:
    """POST `body` as JSON with `headers` added; raises OSError (URLError, HTTPError,
    timeouts) unless 2xx."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "dgm-alerts", **(headers or {})},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        response.read()


def describe(error: BaseException, url: str, secrets: Mapping[str, str] | None = None) -> str:
    """The error in one line, without the URL's path or query (they may hold a token) and
    with any of the `secrets` (header name -> value) that it quotes replaced by '***'."""
    where = urlsplit(url).netloc or "webhook"
    if isinstance(error, urllib.error.HTTPError):
        line = f"{where}: HTTP {error.code} {error.reason}"
    elif isinstance(error, urllib.error.URLError):
        line = f"{where}: {error.reason}"
    else:
        line = f"{where}: {type(error).__name__}: {error}"
    for value in (secrets or {}).values():
        if value:
            line = line.replace(value, "***")
    return line


@dataclass(frozen=True)
class DeliveryReport:
    delivered: int = 0
    failed: int = 0  # notifications whose tries all failed in this run
    waiting: int = 0  # pending, not due yet or behind a failed one


def deliver_due(
    store: AlertStore, webhook: AlertWebhook, now: datetime, budget_s: float = 15.0
) -> DeliveryReport:
    """Send the pending webhook notifications that are due at `now`, oldest first."""
    pending = store.pending_deliveries()
    if not webhook.url or not pending:
        return DeliveryReport(waiting=len(pending))
    deadline = time.monotonic() + budget_s
    delivered = 0
    for index, delivery in enumerate(pending):
        if delivery.next_attempt_at > now or time.monotonic() >= deadline:
            return DeliveryReport(delivered, 0, len(pending) - index)
        error, tries = _try(webhook, delivery, deadline)
        if tries == 0:  # out of time before the first try: not a failure of the receiver
            return DeliveryReport(delivered, 0, len(pending) - index)
        if error is None:
            store.record_attempts(
                delivery.id, attempts=tries, at=now, error=None, next_attempt_at=None
            )
            delivered += 1
            continue
        retry_at = _retry_at(delivery, now)
        store.record_attempts(
            delivery.id, attempts=tries, at=now, error=error, next_attempt_at=retry_at
        )
        if retry_at is None:
            log.error("alert webhook: gave up on notification %d: %s", delivery.id, error)
            continue
        log.warning(
            "alert webhook: notification %d not delivered (%s); retry at %s",
            delivery.id,
            error,
            retry_at.isoformat(),
        )
        return DeliveryReport(delivered, 1, len(pending) - index - 1)
    return DeliveryReport(delivered, 0, 0)


def _try(webhook: AlertWebhook, delivery: Delivery, deadline: float) -> tuple[str | None, int]:
    """(None, tries) once delivered; (last error, tries) when every quick try failed."""
    error = "not tried: out of time"
    for attempt in range(QUICK_TRIES):
        left = deadline - time.monotonic()
        if left <= 0:
            return error, attempt
        if attempt:
            time.sleep(min(QUICK_PAUSE_S * 2 ** (attempt - 1), left))
        try:
            post(
                webhook.url,
                render(webhook.format, delivery.payload),
                timeout_s=max(0.1, min(webhook.timeout_s, left)),
                headers=webhook.headers,
            )
            return None, attempt + 1
        except Exception as caught:  # a notification must never break the analysis
            error = describe(caught, webhook.url, webhook.headers)
    return error, QUICK_TRIES


def _retry_at(delivery: Delivery, now: datetime) -> datetime | None:
    """Next try after a failed run: exponential backoff by earlier failed runs; None once the
    notification is older than GIVE_UP_AFTER."""
    if now - delivery.created_at >= GIVE_UP_AFTER:
        return None
    delay: float | None = None
    for _ in range(delivery.attempts // QUICK_TRIES + 1):
        delay = next_delay(delay, first=RETRY_FIRST_S, cap=RETRY_CAP_S)
    assert delay is not None
    return now + timedelta(seconds=delay)
