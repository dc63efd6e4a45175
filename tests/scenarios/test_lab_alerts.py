"""Alert rules on real data: a duplicate-rate rule over the lab's at-least-once run (SIGKILLs
between produce and commit), and an LSO-lag rule over a real open transaction, evaluated by
the real `dgm analyze` run that collected and published it."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from alerts.run import evaluate_after_analysis
from dgm.alerting.store import AlertStore
from dgm.config.loader import load_config
from dgm.contracts.published import PUBLISHED_FILE
from dgm.util.waiting import wait_until
from shell.analyze_command import alerts_hook
from spark_jobs.job import AnalysisJob
from tests.support.published_lab import PublishedLab, collecting
from tests.support.transactional import in_transaction, transactional_producer
from tests.support.webhook_receiver import Receiver


def _rule(name: str, metric: str, scope: str, threshold: float) -> str:
    return (
        f'[[alerts]]\nname = "{name}"\nmetric = "{metric}"\nscope = "{scope}"\n'
        f'comparison = ">"\nthreshold = {threshold}\nseverity = "critical"\n'
    )


def _config(directory: Path, rules: str, webhook: str, extra: str = "") -> Path:
    path = directory / "dgm.toml"
    path.write_text(
        f'state_dir = "{directory / "state"}"\n{extra}\n'
        f'[alerts_webhook]\nurl = "{webhook}"\n\n{rules}'
    )
    return path


def test_duplicate_rate_rule_fires_once_and_resolves_on_the_lab_run(
    published_lab: PublishedLab, tmp_path: Path
) -> None:
    # A copy of the lab's publication: this test's alert state stays its own.
    (tmp_path / "state").mkdir()
    shutil.copy(published_lab.database, tmp_path / "state" / PUBLISHED_FILE)
    pipeline = published_lab.pipeline("at-least-once")
    with duckdb.connect(str(published_lab.database), read_only=True) as db:
        (rate,) = db.execute(
            "SELECT duplicate_rate FROM verdicts WHERE pipeline = ?", [pipeline]
        ).fetchone() or (None,)
    assert rate is not None and rate > 0, "the SIGKILLs must have duplicated"
    receiver = Receiver()
    try:
        # The lab's pipelines too: the alert links a pipeline to its sink's drill-down.
        assert published_lab.config.source is not None
        lab_text = published_lab.config.source.read_text()
        pipelines = lab_text[lab_text.index("[[pipelines]]") :]
        config_path = _config(
            tmp_path,
            _rule("dups", "duplicate_rate", f"pipeline:{pipeline}", 0) + pipelines,
            receiver.url,
        )
        now = datetime.now(UTC)
        for minutes in range(3):  # three analyses in a row, the condition holding throughout
            summary = evaluate_after_analysis(
                load_config(config_path), now + timedelta(minutes=minutes)
            )
            assert not summary.errors, summary.errors
        wait_until(lambda: receiver.bodies, 30, "the webhook")
        assert len(receiver.bodies) == 1, receiver.bodies  # no repeat while it stays firing
        body = receiver.bodies[0]
        assert body["rule"] == "dups" and body["state"] == "firing"
        assert body["subject"] == pipeline and body["metric"] == "duplicate_rate"
        assert body["value"] == rate and body["threshold"] == 0
        assert body["severity"] == "critical"
        sink = published_lab.reports["at-least-once"].sink_topic
        assert f"topic={sink}" in body["link"]

        # The threshold raised above the current value: the alert resolves, once.
        _config(
            tmp_path,
            _rule("dups", "duplicate_rate", f"pipeline:{pipeline}", rate * 2),
            receiver.url,
        )
        evaluate_after_analysis(load_config(config_path), now + timedelta(minutes=5))
        wait_until(lambda: len(receiver.bodies) == 2, 30, "the resolution")
        assert receiver.bodies[1]["state"] == "resolved"
        history = AlertStore(tmp_path / "state").history(rule="dups")
        assert [entry.state for entry in history] == ["resolved", "firing"]
    finally:
        receiver.stop()


def test_lso_lag_rule_fires_on_an_open_transaction_and_resolves_after_it(
    kafka: Any, spark: Any, tmp_path: Path
) -> None:
    topic = kafka.new_topic("hang", 1)
    receiver = Receiver()
    producer = transactional_producer(kafka, **{"transaction.timeout.ms": 600_000})
    try:
        config_path = _config(
            tmp_path,
            _rule("lso", "lso_lag", f"topic:{topic}", 0),
            receiver.url,
            f"[collectors]\ninclude_topics = ['^{topic}$']\n",
        )
        config = load_config(config_path)
        job = AnalysisJob(
            config,
            kafka.bootstrap_servers,
            master="local[2]",
            spark=spark,
            after_publish=alerts_hook(config),
        )
        job.progress = lambda line: None
        samples = tmp_path / "state" / "samples" / "offsets"

        def analyze_after_a_new_sample() -> None:
            seen = len(list(samples.glob("*.parquet"))) if samples.exists() else 0
            wait_until(lambda: len(list(samples.glob("*.parquet"))) > seen + 1, 60, "samples")

        with collecting(kafka.bootstrap_servers, config, interval_s=0.5):
            in_transaction(producer, topic, 5)  # five records past the LSO, and no end
            analyze_after_a_new_sample()
            job.run_once()  # publishes, then evaluates the rules
            wait_until(lambda: receiver.bodies, 30, "the firing webhook")
            assert receiver.bodies[0]["state"] == "firing" and receiver.bodies[0]["value"] >= 5

            producer.commit_transaction(30)
            analyze_after_a_new_sample()
            job.run_once()
            wait_until(lambda: len(receiver.bodies) >= 2, 30, "the resolving webhook")
        assert [b["state"] for b in receiver.bodies] == ["firing", "resolved"]
        assert receiver.bodies[1]["subject"] == topic
    finally:
        receiver.stop()
