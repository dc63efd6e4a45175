"""evaluate_after_analysis end to end: published DuckDB -> states -> a real local receiver."""

from __future__ import annotations

import dataclasses
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from alerts.run import evaluate_after_analysis
from dgm.alerting.store import AlertStore
from dgm.config.document import DgmConfig
from dgm.config.loader import load_config
from dgm.util.waiting import wait_until
from tests.support.published_rows import at, publish, verdict
from tests.support.webhook_receiver import Receiver


@pytest.fixture(autouse=True)
def _no_env_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DGM_STATE_DIR", raising=False)
    monkeypatch.delenv("DGM_BOOTSTRAP", raising=False)


def configure(tmp_path: Path, url: str, threshold: float = 0.01) -> DgmConfig:
    (tmp_path / "dgm.toml").write_text(
        f"""
state_dir = "state"

[[alerts]]
name = "orders-duplicates"
metric = "duplicate_rate"
scope = "ord*"
comparison = ">"
threshold = {threshold}
severity = "critical"

[alerts_webhook]
url = "{url}"
dashboard_url = "http://dash.example:8501/"
timeout_s = 2
""",
        encoding="utf-8",
    )
    return load_config("dgm.toml", cwd=tmp_path)


def expected_body(
    state: str, seconds: float, threshold: float = 0.01, fired: float = 100
) -> dict[str, Any]:
    line = (
        "[CRITICAL] FIRING rule 'orders-duplicates': duplicate_rate of pipeline orders = 0.05 "
        f"(fires when > {threshold:g})"
        if state == "firing"
        else "[CRITICAL] RESOLVED rule 'orders-duplicates': duplicate_rate of pipeline orders "
        f"= 0.05 (threshold > {threshold:g})"
    )
    return {
        "rule": "orders-duplicates",
        "severity": "critical",
        "metric": "duplicate_rate",
        "scope": "ord*",
        "subject": "orders",
        "value": 0.05,
        "threshold": threshold,
        "comparison": ">",
        "state": state,
        "at": at(seconds).isoformat(),
        "link": "http://dash.example:8501/overview?pipeline=orders",
        "fired_at": at(fired).isoformat(),
        "text": line,
    }


def publish_duplicates(state_dir: Path) -> None:
    publish(state_dir, {"verdicts": [verdict("orders", duplicate_rate=0.05), verdict("other")]})


def test_fires_once_then_resolves_when_the_threshold_is_raised(
    tmp_path: Path, receiver: Receiver
) -> None:
    config = configure(tmp_path, receiver.url)
    publish_duplicates(config.state_dir)

    first = evaluate_after_analysis(config, now=at(100))
    assert first.errors == () and (first.firing, first.delivered) == (1, 1)
    wait_until(lambda: receiver.bodies, timeout=10, what="the firing notification")
    assert receiver.bodies == [expected_body("firing", 100)]

    again = evaluate_after_analysis(config, now=at(200))  # still firing: no repeat
    assert (again.firing, again.notifications, again.delivered) == (1, (), 0)
    assert len(receiver.bodies) == 1

    raised = configure(tmp_path, receiver.url, threshold=0.1)
    resolved = evaluate_after_analysis(raised, now=at(300))
    assert resolved.errors == () and (resolved.firing, resolved.delivered) == (0, 1)
    wait_until(lambda: len(receiver.bodies) == 2, timeout=10, what="the resolution")
    assert receiver.bodies[1] == expected_body("resolved", 300, threshold=0.1)

    history = AlertStore(config.state_dir).history()
    assert [(h.state, h.subject, h.value, h.threshold) for h in history] == [
        ("resolved", "orders", 0.05, 0.1),
        ("firing", "orders", 0.05, 0.01),
    ]
    assert [d.status for d in AlertStore(config.state_dir).deliveries()] == ["delivered"] * 2


def test_receiver_down_is_recorded_and_retried_until_delivered(tmp_path: Path) -> None:
    closed = Receiver()
    closed.stop()  # nothing listens on this port now
    config = configure(tmp_path, closed.url)
    publish_duplicates(config.state_dir)
    store = AlertStore(config.state_dir)

    down = evaluate_after_analysis(config, now=at(100))
    assert down.errors == () and (down.firing, down.delivered, down.delivery_failures) == (1, 0, 1)
    [failed] = store.deliveries()
    assert (failed.status, failed.attempts, failed.next_attempt_at) == ("pending", 3, at(130))
    assert failed.error is not None and "refused" in failed.error.lower()
    assert "secret" not in failed.error  # the URL's query may hold a token

    early = evaluate_after_analysis(config, now=at(120))  # backoff: not due before 130
    assert (early.delivered, early.delivery_failures, early.waiting) == (0, 0, 1)
    assert store.deliveries()[0].attempts == 3

    up = Receiver(closed.port)
    try:
        delivered = evaluate_after_analysis(config, now=at(140))
        assert (delivered.delivered, delivered.waiting, delivered.notifications) == (1, 0, ())
        wait_until(lambda: up.bodies, timeout=10, what="the retried notification")
        assert up.bodies == [expected_body("firing", 100)]
        [done] = store.deliveries()
        assert (done.status, done.attempts, done.error, done.delivered_at) == (
            "delivered",
            4,
            None,
            at(140),
        )
        evaluate_after_analysis(config, now=at(500))
        assert len(up.bodies) == 1  # delivered exactly once
    finally:
        up.stop()


def test_a_resolution_waits_behind_its_undelivered_firing(tmp_path: Path) -> None:
    closed = Receiver()
    closed.stop()
    config = configure(tmp_path, closed.url)
    publish_duplicates(config.state_dir)
    evaluate_after_analysis(config, now=at(100))
    raised = configure(tmp_path, closed.url, threshold=0.1)
    evaluate_after_analysis(raised, now=at(200))  # resolved while the receiver is down
    up = Receiver(closed.port)
    try:
        summary = evaluate_after_analysis(raised, now=at(400))
        assert summary.delivered == 2
        wait_until(lambda: len(up.bodies) == 2, timeout=10, what="both notifications")
        assert [body["state"] for body in up.bodies] == ["firing", "resolved"]
    finally:
        up.stop()


def test_without_a_webhook_only_the_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = dataclasses.replace(configure(tmp_path, ""), alerts_webhook=DgmConfig().alerts_webhook)
    publish_duplicates(config.state_dir)
    with caplog.at_level("INFO", logger="dgm.alerts"):
        summary = evaluate_after_analysis(config, now=at(100))
    assert summary.firing == 1 and summary.waiting == 0
    assert AlertStore(config.state_dir).deliveries() == []
    assert [r.getMessage() for r in caplog.records if r.name == "dgm.alerts"] == [
        "alert firing [critical] rule 'orders-duplicates': duplicate_rate of pipeline orders "
        "= 0.05 (fires when > 0.01)"
    ]


def test_nothing_published_changes_nothing(tmp_path: Path) -> None:
    config = configure(tmp_path, "")
    summary = evaluate_after_analysis(config, now=at(100))
    assert summary.firing == 0 and len(summary.errors) == 1
    assert "no analysis published yet" in summary.errors[0]


def test_a_silent_receiver_costs_bounded_time(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/hook"
        config = configure(tmp_path, url)
        config = dataclasses.replace(
            config, alerts_webhook=dataclasses.replace(config.alerts_webhook, timeout_s=0.2)
        )
        publish_duplicates(config.state_dir)
        started = time.monotonic()
        summary = evaluate_after_analysis(config, now=at(100))
        assert time.monotonic() - started < 10
    assert summary.errors == () and summary.delivery_failures == 1
    [failed] = AlertStore(config.state_dir).deliveries()
    assert failed.error is not None and "timed out" in failed.error


def test_an_unusable_store_is_reported_not_raised(tmp_path: Path) -> None:
    config = configure(tmp_path, "")
    publish_duplicates(config.state_dir)
    (config.state_dir / "alerts.sqlite").mkdir()
    summary = evaluate_after_analysis(config, now=at(100))
    assert summary.firing == 0 and len(summary.errors) == 1
    assert summary.errors[0].startswith("alert evaluation failed: OperationalError")
