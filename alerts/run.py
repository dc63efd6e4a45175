"""Entry point for the analysis job: evaluate every rule after a publication, notify, remember.

`evaluate_after_analysis` never raises and never runs long (webhook posts have timeouts and a
budget): whatever goes wrong is logged on dgm.alerts and listed in the summary's `errors`, and
the analysis carries on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from alerts.evaluate import evaluate
from alerts.metrics import MetricsUnavailable, Values, read_values
from alerts.notify import DeliveryReport, deliver_due, log_notification, payload
from dgm.alerting.rules import AlertState, Evaluation, Notification, StateKey
from dgm.alerting.store import AlertStore, rules_in_effect
from dgm.config.document import DgmConfig

log = logging.getLogger("dgm.alerts")


@dataclass(frozen=True)
class EvaluationSummary:
    """What one evaluation did."""

    at: datetime
    rules: int  # rules in effect
    pending: int  # (rule, subject) pairs whose condition holds, for_s not reached yet
    firing: int
    notifications: tuple[Notification, ...]  # firings, repeats and resolutions sent now
    delivered: int  # webhook notifications delivered in this run (earlier ones included)
    delivery_failures: int  # webhook notifications that failed in this run (will be retried)
    waiting: int  # webhook notifications still pending
    errors: tuple[str, ...]  # rule name clashes, unreadable metrics, unexpected errors


def evaluate_after_analysis(config: DgmConfig, now: datetime | None = None) -> EvaluationSummary:
    """Evaluate every rule in effect against the published analysis at `now` (default: the
    current time), log and queue the notifications, and deliver the due webhook ones."""
    now = now or datetime.now(UTC)
    errors: list[str] = []
    try:
        return _evaluate(config, now, errors)
    except Exception as error:  # alerting must never fail the analysis
        log.exception("alert evaluation failed")
        errors.append(f"alert evaluation failed: {type(error).__name__}: {error}")
        return EvaluationSummary(now, 0, 0, 0, (), 0, 0, 0, tuple(errors))


def _evaluate(config: DgmConfig, now: datetime, errors: list[str]) -> EvaluationSummary:
    store = AlertStore(config.state_dir)
    rules, rule_errors = rules_in_effect(config, store)
    errors += rule_errors
    values: dict[str, Values] = {}
    try:
        for name, result in read_values(config.state_dir, rules, now).items():
            if isinstance(result, str):
                errors.append(f"rule {name!r}: {result}")
            else:
                values[name] = result
    except MetricsUnavailable as error:  # nothing to judge: every state stays as it is
        errors.append(str(error))
    for message in errors:
        log.error("alerts: %s", message)
    previous = store.states()
    evaluation = evaluate(rules, values, previous, now)
    for notification in evaluation.notifications:
        log_notification(notification)
    webhook = config.alerts_webhook
    sinks = {p.name: p.sink_names()[0] for p in config.pipelines}
    queued = (
        [
            (n, payload(n, webhook.dashboard_url, sinks, _fired_at(n, previous, evaluation)))
            for n in evaluation.notifications
        ]
        if webhook.url
        else []
    )
    store.apply(evaluation, queued)
    report = DeliveryReport()
    try:
        report = deliver_due(store, webhook, now)
    except Exception as error:  # recorded per notification inside; this is a store failure
        log.exception("alert webhook delivery failed")
        errors.append(f"webhook delivery failed: {type(error).__name__}: {error}")
    statuses = [state.status for state in evaluation.states.values()]
    return EvaluationSummary(
        at=now,
        rules=len(rules),
        pending=statuses.count("pending"),
        firing=statuses.count("firing"),
        notifications=evaluation.notifications,
        delivered=report.delivered,
        delivery_failures=report.failed,
        waiting=report.waiting,
        errors=tuple(errors),
    )


def _fired_at(
    notification: Notification, previous: Mapping[StateKey, AlertState], evaluation: Evaluation
) -> datetime | None:
    """When the notified (rule, subject) began firing: its new state's for a firing, its last
    state's for a resolution."""
    key = (notification.rule.name, notification.subject)
    state = (previous if notification.state == "resolved" else evaluation.states).get(key)
    return state.fired_at if state is not None else None
