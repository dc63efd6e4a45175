"""Webhook formats (json, slack, alertmanager) and headers, against a real local receiver."""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest

from alerts.formats import render
from alerts.run import evaluate_after_analysis
from dgm.alerting.store import AlertStore
from dgm.config.document import DgmConfig
from dgm.config.loader import load_config
from dgm.config.problems import ConfigError
from dgm.util.waiting import wait_until
from tests.support.published_rows import at, publish, verdict
from tests.support.webhook_receiver import Receiver

TOKEN = "Bearer s3cr3t-t0ken-value"

# Alertmanager's API v2 (api/v2/openapi.yaml, definitions postableAlerts, postableAlert,
# alert, labelSet) as a JSON schema, plus what Alertmanager's own validation adds on
# receipt (label names match [a-zA-Z_][a-zA-Z0-9_]*, at least one label).
POSTABLE_ALERTS: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    "definitions": {
        "labelSet": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "patternProperties": {"^[a-zA-Z_][a-zA-Z0-9_]*$": {"type": "string"}},
        },
        "alert": {
            "type": "object",
            "properties": {
                "labels": {"$ref": "#/definitions/labelSet", "minProperties": 1},
                "generatorURL": {"type": "string", "format": "uri"},
            },
            "required": ["labels"],
        },
        "postableAlert": {
            "type": "object",
            "allOf": [
                {
                    "properties": {
                        "startsAt": {"type": "string", "format": "date-time"},
                        "endsAt": {"type": "string", "format": "date-time"},
                        "annotations": {"$ref": "#/definitions/labelSet"},
                    }
                },
                {"$ref": "#/definitions/alert"},
            ],
        },
    },
    "type": "array",
    "items": {"$ref": "#/definitions/postableAlert"},
}


def assert_postable_alerts(body: Any) -> None:
    """`body` passes Alertmanager's POST /api/v2/alerts: the schema, valid label names, RFC
    3339 times with a zone, endsAt not before startsAt, an absolute generatorURL."""
    jsonschema.Draft4Validator(POSTABLE_ALERTS).validate(body)
    for alert in body:
        for name in alert["labels"]:
            assert name.isidentifier() and name.isascii(), name
        times = [datetime.fromisoformat(alert[k]) for k in ("startsAt", "endsAt") if k in alert]
        assert all(t.tzinfo is not None for t in times)
        assert times == sorted(times)
        assert urlsplit(alert["generatorURL"]).scheme in ("http", "https")


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DGM_STATE_DIR", raising=False)
    monkeypatch.delenv("DGM_BOOTSTRAP", raising=False)
    monkeypatch.setenv("DGM_TEST_WEBHOOK_TOKEN", TOKEN)


def configure(tmp_path: Path, url: str, format: str, threshold: float = 0.01) -> DgmConfig:
    (tmp_path / "dgm.toml").write_text(
        f"""
state_dir = "state"

[[alerts]]
name = "orders-duplicates"
metric = "duplicate_rate"
scope = "ord*"
threshold = {threshold}
severity = "critical"

[alerts_webhook]
url = "{url}"
dashboard_url = "http://dash.example:8501/"
format = "{format}"
timeout_s = 2
[alerts_webhook.headers]
Authorization = "${{DGM_TEST_WEBHOOK_TOKEN}}"
X-Scope-OrgID = "team-a"
""",
        encoding="utf-8",
    )
    return load_config("dgm.toml", cwd=tmp_path)


def fire_then_resolve(tmp_path: Path, receiver: Receiver, format: str) -> list[Any]:
    config = configure(tmp_path, receiver.url, format)
    publish(config.state_dir, {"verdicts": [verdict("orders", duplicate_rate=0.05)]})
    assert evaluate_after_analysis(config, now=at(100)).delivered == 1
    raised = configure(tmp_path, receiver.url, format, threshold=0.1)
    assert evaluate_after_analysis(raised, now=at(300)).delivered == 1
    wait_until(lambda: len(receiver.bodies) == 2, timeout=10, what="firing and resolution")
    return receiver.bodies


def test_headers_arrive_with_every_post_and_are_not_in_repr(
    tmp_path: Path, receiver: Receiver
) -> None:
    fire_then_resolve(tmp_path, receiver, "json")
    assert len(receiver.headers) == 2
    for received in receiver.headers:
        headers = {name.lower(): value for name, value in received.items()}  # case-insensitive
        assert headers["authorization"] == TOKEN
        assert headers["x-scope-orgid"] == "team-a"
        assert headers["content-type"] == "application/json"
    config = configure(tmp_path, receiver.url, "json")
    assert "s3cr3t" not in repr(config) and "s3cr3t" not in str(config)


def test_json_carries_a_human_line(tmp_path: Path, receiver: Receiver) -> None:
    firing, resolved = fire_then_resolve(tmp_path, receiver, "json")
    assert firing["text"] == (
        "[CRITICAL] FIRING rule 'orders-duplicates': duplicate_rate of pipeline orders = 0.05 "
        "(fires when > 0.01)"
    )
    assert resolved["text"].startswith("[CRITICAL] RESOLVED rule 'orders-duplicates'")
    assert (firing["state"], resolved["state"]) == ("firing", "resolved")
    assert resolved["fired_at"] == firing["at"] == at(100).isoformat()


def test_slack_has_top_level_text(tmp_path: Path, receiver: Receiver) -> None:
    firing, resolved = fire_then_resolve(tmp_path, receiver, "slack")
    assert firing["text"].startswith("[CRITICAL] FIRING rule 'orders-duplicates'")
    assert resolved["text"].startswith("[CRITICAL] RESOLVED rule 'orders-duplicates'")
    [attachment] = firing["attachments"]
    assert attachment["color"] == "danger"
    assert attachment["title_link"] == "http://dash.example:8501/overview?pipeline=orders"
    assert resolved["attachments"][0]["color"] == "good"
    assert set(firing) == {"text", "attachments"}


def test_alertmanager_bodies_are_postable_alerts(tmp_path: Path, receiver: Receiver) -> None:
    firing, resolved = fire_then_resolve(tmp_path, receiver, "alertmanager")
    assert_postable_alerts(firing)
    assert_postable_alerts(resolved)
    [alert], [end] = firing, resolved
    assert alert["labels"] == {
        "alertname": "orders-duplicates",
        "severity": "critical",
        "metric": "duplicate_rate",
        "pipeline": "orders",
        "source": "dgm",
    }
    assert end["labels"] == alert["labels"]  # the same alert, so Alertmanager resolves it
    assert alert["annotations"]["summary"].startswith("[CRITICAL] FIRING")
    assert "duplicate_rate of pipeline orders is 0.05" in alert["annotations"]["description"]
    assert alert["startsAt"] == end["startsAt"] == at(100).isoformat()
    assert "endsAt" not in alert and end["endsAt"] == at(300).isoformat()
    assert alert["generatorURL"] == "http://dash.example:8501/overview?pipeline=orders"


def test_schema_check_rejects_what_alertmanager_rejects() -> None:
    body = render(
        "alertmanager",
        {
            "rule": "r",
            "severity": "warning",
            "metric": "lso_lag",
            "scope": "topic:*",
            "subject": "t",
            "value": None,
            "threshold": 5.0,
            "comparison": ">",
            "state": "firing",
            "at": at(1).isoformat(),
            "link": "http://d/topic?topic=t",
        },
    )
    assert_postable_alerts(body)
    assert body[0]["labels"]["topic"] == "t" and body[0]["annotations"]["value"] == ""
    with pytest.raises(jsonschema.ValidationError):
        assert_postable_alerts({"labels": {}})  # not a list
    with pytest.raises(jsonschema.ValidationError):
        assert_postable_alerts([{"annotations": {"summary": "s"}}])  # no labels
    with pytest.raises(jsonschema.ValidationError):
        assert_postable_alerts([{"labels": {"a": 1}}])  # label values are strings


@pytest.mark.parametrize("status", [401, 500])
def test_header_values_never_reach_logs_or_the_outbox_when_delivery_fails(
    tmp_path: Path, receiver: Receiver, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    receiver.status = status
    config = configure(tmp_path, receiver.url, "alertmanager")
    publish(config.state_dir, {"verdicts": [verdict("orders", duplicate_rate=0.05)]})
    with caplog.at_level(logging.DEBUG):
        summary = evaluate_after_analysis(config, now=at(100))
    assert summary.delivery_failures == 1
    assert receiver.headers and receiver.headers[0]["Authorization"] == TOKEN  # it was sent
    [failed] = AlertStore(config.state_dir).deliveries()
    assert failed.error is not None and f"HTTP {status}" in failed.error
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert f"HTTP {status}" in logged  # the failure is logged...
    for secret in ("s3cr3t", "Bearer", "token=secret"):  # ...without header values or URL
        assert secret not in logged
        assert secret not in failed.error
        assert secret not in str(failed.payload)


def test_a_refused_connection_is_logged_without_header_values(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    closed = Receiver()
    closed.stop()
    config = configure(tmp_path, closed.url, "slack")
    publish(config.state_dir, {"verdicts": [verdict("orders", duplicate_rate=0.05)]})
    with caplog.at_level(logging.DEBUG):
        assert evaluate_after_analysis(config, now=at(100)).delivery_failures == 1
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "not delivered" in logged and "s3cr3t" not in logged


def test_bad_format_and_header_names_are_config_errors(tmp_path: Path) -> None:
    (tmp_path / "dgm.toml").write_text('[alerts_webhook]\nformat = "teams"\n')
    with pytest.raises(ConfigError, match=r"alerts_webhook\.format: expected one of 'json'"):
        load_config("dgm.toml", cwd=tmp_path)
    (tmp_path / "dgm.toml").write_text('[alerts_webhook.headers]\n"Bad Header" = "hunter2"\n')
    with pytest.raises(ConfigError, match=r"alerts_webhook\.headers\.Bad Header: expected") as e:
        load_config("dgm.toml", cwd=tmp_path)
    assert "hunter2" not in str(e.value)
