"""The alert state machine, pure: rules + current values + previous states + now -> new states
and the notifications to send.

Per (rule, subject): ok -> pending (the condition holds, for_s not reached yet) -> firing
(notify) -> resolved (the condition stopped holding: notify, back to ok). While firing, a rule
notifies again only every renotify_s (0: never). "ok" is the absence of a state. A subject
that has no value any more (gone from the data, or out of a changed scope) does not hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime

from alerts.metrics import Values
from dgm.alerting.rules import AlertState, Evaluation, Notification, StateKey, holds
from dgm.config.alerts import AlertRule


def evaluate(
    rules: Iterable[AlertRule],
    values: Mapping[str, Values],
    states: Mapping[StateKey, AlertState],
    now: datetime,
) -> Evaluation:
    """The next states and the notifications due at `now`.

    `values` maps rule name -> subject -> value; a rule absent from it (its values could not be
    read) keeps its states as they are. States of rules no longer in effect are dropped.
    """
    new_states: dict[StateKey, AlertState] = {}
    notifications: list[Notification] = []
    for rule in rules:
        previous = {key: state for key, state in states.items() if key[0] == rule.name}
        if rule.name not in values:
            new_states.update(previous)
            continue
        current = values[rule.name]
        subjects = sorted(set(current) | {subject for _, subject in previous})
        for subject in subjects:
            key = (rule.name, subject)
            state, notification = step(rule, subject, current.get(subject), previous.get(key), now)
            if state is not None:
                new_states[key] = state
            if notification is not None:
                notifications.append(notification)
    return Evaluation(new_states, tuple(notifications))


def step(
    rule: AlertRule,
    subject: str,
    value: float | None,
    state: AlertState | None,
    now: datetime,
) -> tuple[AlertState | None, Notification | None]:
    """One (rule, subject)'s next state (None: ok) and what to notify, if anything."""
    if not holds(rule, value):
        if state is not None and state.status == "firing":
            return None, Notification(rule, subject, "resolved", value, now)
        return None, None
    if state is None:
        state = AlertState(rule.name, subject, "pending", since=now, value=value)
    state = replace(state, value=value)
    if state.status == "pending":
        if (now - state.since).total_seconds() < rule.for_s:
            return state, None
        fired = replace(state, status="firing", fired_at=now, notified_at=now)
        return fired, Notification(rule, subject, "firing", value, now)
    last = state.notified_at or state.since
    if rule.renotify_s > 0 and (now - last).total_seconds() >= rule.renotify_s:
        return replace(state, notified_at=now), Notification(
            rule, subject, "firing", value, now, repeat=True
        )
    return state, None
