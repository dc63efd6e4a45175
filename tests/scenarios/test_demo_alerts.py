"""`dgm demo`'s alerting, without the whole demo: its dgm.toml (the rules, and the webhook
pointing at the receiver it starts) with the broken exactly-once pipeline the lab adds,
evaluated as `dgm analyze` does after each run against a publication in which that pipeline
reads aborted transactions. The demo's own receiver gets the notifications, keeps them in the
alert store, and the dashboard's Alerts page shows them. (tests/shell/test_demo_command.py runs the
whole demo and waits for the same firing from the real pipeline.)"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from alerts.receiver import WebhookReceiver
from alerts.run import evaluate_after_analysis
from dgm.alerting.store import AlertStore
from dgm.config.loader import CONFIG_FILE_NAME, load_config
from lab.pipeline import PipelineNames, add_to_config, pipeline_config
from lab.processors.settings import Mode
from shell.demo_command import demo_config, prepare_state_dir
from tests.support.dashboard_app import APP, healthy, page
from tests.support.published_rows import publish, verdict

BROKEN = "demo-exactly-once-broken"
FINE = "demo-exactly-once"
DASHBOARD = "http://127.0.0.1:8501"


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("DGM_STATE_DIR", "DGM_BOOTSTRAP", "DGM_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    state = tmp_path / "demo"
    prepare_state_dir(state)
    return state


@pytest.fixture
def receiver(state_dir: Path) -> Iterator[WebhookReceiver]:
    """The receiver as `dgm demo` starts it, over the demo's state directory."""
    with WebhookReceiver(AlertStore(state_dir)) as running:
        yield running


def demo_toml(state_dir: Path, receiver: WebhookReceiver) -> Path:
    """The demo's dgm.toml, with the two exactly-once pipelines the lab adds to it."""
    path = state_dir / CONFIG_FILE_NAME
    path.write_text(demo_config(state_dir, "127.0.0.1:9092", receiver.url, DASHBOARD))
    modes: tuple[tuple[str, Mode], ...] = ((BROKEN, "exactly-once-broken"), (FINE, "exactly-once"))
    for name, mode in modes:
        run_dir = state_dir / "lab" / name
        config = pipeline_config(name, mode, PipelineNames.fixed(name), run_dir)
        assert add_to_config(path, config, lambda _: None) is None
    return path


def publication(state_dir: Path, now: datetime, aborted_now: int) -> None:
    """Both pipelines over three windows; the broken one read aborted records in the first
    two and `aborted_now` in the newest."""
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=2)
    aborted = {BROKEN: [3, 4, aborted_now], FINE: [0, 0, 0]}
    rows: dict[str, list[dict[str, Any]]] = {
        "runs": [{"run_id": "r", "started_at": now, "finished_at": now, "window_s": 60}],
        "verdicts": [
            verdict(
                BROKEN,
                achieved="no guarantee",
                meets_declared=False,
                records_checked=600,
                aborted_reads=sum(aborted[BROKEN]),
                sink=[f"{BROKEN}-sink"],
            ),
            verdict(FINE, records_checked=600, aborted_reads=0, sink=[f"{FINE}-sink"]),
        ],
        "pipeline_windows": [
            {
                "pipeline": name,
                "window_start": start + timedelta(minutes=k),
                "records_checked": 200,
                "aborted_reads": counts[k],
            }
            for name, counts in aborted.items()
            for k in range(3)
        ],
    }
    publish(state_dir, rows)


def test_the_demo_rules_fire_on_aborted_reads_and_its_receiver_shows_them(
    state_dir: Path, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = demo_toml(state_dir, receiver)
    config = load_config(path)
    assert config.alerts_webhook.url == receiver.url and receiver.url.startswith(
        "http://127.0.0.1:"
    )
    now = datetime.now(UTC)
    publication(state_dir, now, aborted_now=2)
    summary = evaluate_after_analysis(config, now)
    assert not summary.errors, summary.errors
    assert summary.delivered == 2 and summary.firing == 2
    store = AlertStore(state_dir)
    got = {(r.body["rule"], r.body["subject"], r.body["state"]) for r in store.received()}
    assert got == {
        ("aborted-reads", BROKEN, "firing"),
        ("verdict-violated", BROKEN, "firing"),
    }
    aborted = next(r.body for r in store.received() if r.body["rule"] == "aborted-reads")
    assert aborted["value"] == 2 and aborted["severity"] == "critical"
    assert aborted["link"] == f"{DASHBOARD}/topic?topic={BROKEN}-sink"

    # A newest window without aborted reads: the `latest` rule resolves, the verdict holds.
    later = now + timedelta(minutes=1)
    publication(state_dir, later, aborted_now=0)
    summary = evaluate_after_analysis(config, later)
    assert summary.delivered == 1 and summary.firing == 1
    newest = store.received()[0].body
    assert (newest["rule"], newest["state"]) == ("aborted-reads", "resolved")

    monkeypatch.setenv("DGM_CONFIG", str(path))
    monkeypatch.setenv("DGM_STATE_DIR", str(state_dir))
    monkeypatch.setenv("DGM_DASHBOARD_REFRESH_S", "0")
    at = page(AppTest.from_file(str(APP), default_timeout=60), "alerts")
    healthy(at)
    tables = [table.value for table in at.dataframe]
    received = next(t for t in tables if "received" in t.columns)
    assert list(zip(received["rule"], received["state"], received["subject"], strict=True)) == [
        ("aborted-reads", "resolved", BROKEN),
        ("verdict-violated", "firing", BROKEN),
        ("aborted-reads", "firing", BROKEN),
    ]
    assert all(BROKEN in text for text in received["text"])
    delivered = next(t for t in tables if "delivered" in t.columns)
    assert len(delivered) == 3 and all(delivered["delivered"].notna())
    assert any("Received by the local webhook receiver" in str(h.value) for h in at.subheader)
