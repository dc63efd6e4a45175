"""Webhook bodies, pure: dgm's JSON notification -> what a receiver of each format accepts.

The outbox stores dgm's own JSON body (see alerts.notify.payload); the configured format is
applied when a notification is sent, so changing `[alerts_webhook] format` also changes how
notifications that are still pending are delivered.

- json: dgm's body as it is (it carries a one-line `text`).
- slack: a Slack / Mattermost incoming-webhook message: top-level `text`, plus one attachment
  coloured by state and severity, linking to the dashboard.
- alertmanager: Alertmanager's v2 API (POST /api/v2/alerts) takes a JSON list of alerts;
  labels identify the alert (alertname, severity, metric, and the subject under its scope
  kind: pipeline, topic, group or run), annotations describe it, startsAt is when it fired,
  endsAt is set on resolution. Alertmanager resolves a firing alert by itself after its
  `resolve_timeout` (default 5 min) unless the alert is sent again: give the rules a
  renotify_s below it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dgm.config.alerts import WebhookFormat, split_scope

_COLOURS = {"info": "#439FE0", "warning": "warning", "critical": "danger"}


def text_line(body: Mapping[str, Any]) -> str:
    """One line for people: '[CRITICAL] FIRING rule 'x': duplicate_rate of pipeline orders =
    0.05 (fires when > 0.01)'."""
    kind, _ = split_scope(str(body["scope"]), str(body["metric"]))
    value = body.get("value")
    shown = "no value" if value is None else f"{value:g}"
    firing = body["state"] == "firing"
    return (
        f"[{str(body['severity']).upper()}] {'FIRING' if firing else 'RESOLVED'} "
        f"rule {body['rule']!r}: {body['metric']} of {kind} {body['subject']} = {shown} "
        f"({'fires when' if firing else 'threshold'} {body['comparison']} {body['threshold']:g})"
    )


def render(format: WebhookFormat, body: Mapping[str, Any]) -> Any:
    """The JSON document to POST for `body` (dgm's notification) in `format`."""
    text = str(body.get("text") or text_line(body))
    if format == "slack":
        return _slack(body, text)
    if format == "alertmanager":
        return [_alertmanager(body, text)]
    return {**body, "text": text}


def _slack(body: Mapping[str, Any], text: str) -> dict[str, Any]:
    colour = "good" if body["state"] == "resolved" else _COLOURS.get(str(body["severity"]), "")
    return {
        "text": text,
        "attachments": [
            {
                "fallback": text,
                "color": colour,
                "title": f"{body['rule']}: {body['subject']}",
                "title_link": body["link"],
                "text": f"Open in the dgm dashboard: {body['link']}",
            }
        ],
    }


def _alertmanager(body: Mapping[str, Any], text: str) -> dict[str, Any]:
    kind, _ = split_scope(str(body["scope"]), str(body["metric"]))
    value = body.get("value")
    started = body.get("fired_at") or body["at"]
    alert: dict[str, Any] = {
        "labels": {
            "alertname": str(body["rule"]),
            "severity": str(body["severity"]),
            "metric": str(body["metric"]),
            kind: str(body["subject"]),
            "source": "dgm",
        },
        "annotations": {
            "summary": text,
            "description": (
                f"{body['metric']} of {kind} {body['subject']} is "
                f"{'no value' if value is None else f'{value:g}'}; rule {body['rule']!r} "
                f"fires when {body['comparison']} {body['threshold']:g} "
                f"(scope {body['scope']!r}). Dashboard: {body['link']}"
            ),
            "value": "" if value is None else f"{value:g}",
            "threshold": f"{body['threshold']:g}",
        },
        "startsAt": started,
        "generatorURL": body["link"],
    }
    if body["state"] == "resolved":
        alert["endsAt"] = body["at"]
    return alert
