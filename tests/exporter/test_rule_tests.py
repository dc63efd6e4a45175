"""`promtool test rules` on deploy/prometheus/alerts.yml: the alerts fire on the series the
exporter serves and resolve once the problem stops.

The aborted-read series is not written by hand: at every scrape of the test's timeline a
publication holding what the analysis would have seen by then (its newest sample 15 s
before the scrape) is read by the exporter's own snapshot, so the rule is tested against the
exporter's last-closed-window arithmetic. Aborted reads stop at 3 min; the alert resolves
at the evaluation two windows later, while the total over the retention still holds them
(an alert on it would fire for days). The group-status and staleness series are written as
the exporter serves them: one status series per group whose value moves (so `for:` keeps
counting through STALL -> STOP), and the staleness threshold `dgm verdicts` uses."""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from dgm.contracts.published import stale_after_s
from exporter.snapshot import read_snapshot
from tests.support.deploy_files import RULES
from tests.support.published_rows import publish, verdict

WINDOW_S = 60
SCRAPE_S = 60  # the test's scrape and evaluation interval: one window
T0 = datetime(2026, 1, 1, tzinfo=UTC)  # the timeline's 0, on a window boundary
PIPELINE = "demo-exactly-once-broken"
ABORTED = {0: 4, 1: 2, 2: 3}  # window -> aborted reads: the first three minutes
STOPPED_AT_S = 3 * WINDOW_S
MINUTES = 7
TARGET = {"job": "dgm", "instance": "exporter:9598"}


def publication_at(state_dir: Path, sampled_at: datetime) -> None:
    """What `dgm analyze` publishes from samples up to `sampled_at`: the windows begun by
    then, 50 checked records each, with ABORTED's aborted reads."""
    started = [k for k in range(MINUTES) if T0 + timedelta(seconds=k * WINDOW_S) <= sampled_at]
    publish(
        state_dir,
        {
            "runs": [
                {
                    "run_id": "run",
                    "started_at": sampled_at,
                    "finished_at": sampled_at + timedelta(seconds=5),
                    "last_sample_at": sampled_at,
                    "window_s": WINDOW_S,
                }
            ],
            "verdicts": [
                verdict(
                    PIPELINE,
                    records_checked=50 * len(started),
                    aborted_reads=sum(ABORTED.get(k, 0) for k in started),
                )
            ],
            "pipeline_windows": [
                {
                    "pipeline": PIPELINE,
                    "window_start": T0 + timedelta(seconds=k * WINDOW_S),
                    "records_checked": 50,
                    "aborted_reads": ABORTED.get(k, 0),
                }
                for k in started
            ],
        },
    )


def exporter_series(state_dir: Path, family: str) -> list[float]:
    """`family`'s value for PIPELINE at each scrape of the timeline (0 when absent)."""
    values = []
    for minute in range(MINUTES):
        scraped_at = T0 + timedelta(seconds=minute * SCRAPE_S)
        publication_at(state_dir, scraped_at - timedelta(seconds=15))
        series = read_snapshot(state_dir, scraped_at).series.get(family, {})
        values.append(series.get((PIPELINE,), 0.0))
    return values


def selector(name: str, **labels: str) -> str:
    inner = ",".join(f'{key}="{value}"' for key, value in sorted({**TARGET, **labels}.items()))
    return f"{name}{{{inner}}}"


def go_number(value: float) -> str:
    """A float as Go's templates print $value (%v)."""
    return str(int(value)) if float(value).is_integer() else repr(value)


def humanize_duration(seconds: float) -> str:
    """Prometheus' humanizeDuration, for a whole number of seconds of a minute or more."""
    assert seconds >= 60 and float(seconds).is_integer(), seconds
    whole = int(seconds)
    minutes, hours = whole // 60 % 60, whole // 3600
    assert hours < 24, seconds
    shown = f"{minutes}m {whole % 60}s"
    return f"{hours}h {shown}" if hours else shown


def rendered(text: str, labels: dict[str, str], value: float) -> str:
    """A rule's annotation as Prometheus renders it, for the templates the rules use on
    $labels and $value; anything else must be given in the test as it renders."""

    def one(match: re.Match[str]) -> str:
        inner = match[1].strip()
        if inner == "$value":
            return go_number(value)
        if inner == "$value | humanizeDuration":
            return humanize_duration(value)
        if inner.startswith("$labels."):
            return labels[inner.removeprefix("$labels.")]
        raise AssertionError(f"give {text!r} as it renders (template {inner!r})")

    return re.sub(r"\{\{(.*?)\}\}", one, text)


def rules() -> dict[str, dict[str, Any]]:
    document = yaml.safe_load(RULES.read_text())
    return {rule["alert"]: rule for group in document["groups"] for rule in group["rules"]}


def firing(alert: str, labels: dict[str, str], value: float, **annotations: str) -> dict[str, Any]:
    """One expected alert: its series' labels and the rule's, every annotation rendered."""
    rule = rules()[alert]
    every = {**TARGET, **labels, **rule.get("labels", {})}
    texts = {
        name: annotations.get(name) or rendered(text, every, value)
        for name, text in rule.get("annotations", {}).items()
    }
    return {"exp_labels": every, "exp_annotations": texts}


def run_rule_tests(promtool: str, directory: Path, tests: list[dict[str, Any]]) -> None:
    path = directory / "alerts_test.yml"
    document = {"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": tests}
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    done = subprocess.run(
        [promtool, "test", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{done.stdout}{done.stderr}\n{path.read_text()}"
    assert "SUCCESS" in done.stdout, done.stdout


def test_aborted_reads_fire_and_resolve_within_two_windows(tmp_path: Path, promtool: str) -> None:
    state_dir = tmp_path / "state"
    window = exporter_series(state_dir, "dgm_pipeline_last_window_aborted_read_records")
    total = exporter_series(state_dir, "dgm_pipeline_aborted_read_records")
    # Each window's count is served once it has closed; the total never goes back to 0.
    assert window[:6] == [0, 0, 4, 2, 3, 0] and not any(window[6:])
    assert total[-1] == sum(ABORTED.values())
    resolved_m = (STOPPED_AT_S + 2 * WINDOW_S) // SCRAPE_S
    checks = []
    for minute, value in enumerate(window):
        labels = {"pipeline": PIPELINE}
        expected = [firing("DgmAbortedReads", labels, value)] if value > 0 else []
        checks.append(
            {"eval_time": f"{minute}m", "alertname": "DgmAbortedReads", "exp_alerts": expected}
        )
    assert any(c["exp_alerts"] for c in checks[:resolved_m]), "it fires"
    assert not any(c["exp_alerts"] for c in checks[resolved_m:]), "it resolves in two windows"
    values = " ".join(go_number(v) for v in window)
    series = [
        {"series": selector("dgm_pipeline_last_window_aborted_read_records", pipeline=PIPELINE),
         "values": values},
        {"series": selector("dgm_pipeline_aborted_read_records", pipeline=PIPELINE),
         "values": " ".join(go_number(v) for v in total)},
    ]  # fmt: skip
    run_rule_tests(
        promtool,
        tmp_path,
        [{"interval": "1m", "input_series": series, "alert_rule_test": checks}],
    )


def test_a_group_stalling_then_stopping_fires_after_for_once(tmp_path: Path, promtool: str) -> None:
    # STALL from 2 min, STOP from 5 min: one series whose value moves, so the rule's 5 min
    # `for:` runs from 2 min through the change and fires at 7 min.
    group = {"group_id": "orders-app"}
    series = [
        {"series": selector("dgm_consumer_group_status", **group),
         "values": "0 0 2 2 2 3 3 3 3 3"},
        {"series": selector("dgm_consumer_group_status_info", **group, status="OK"),
         "values": "1 1 stale"},
        {"series": selector("dgm_consumer_group_status_info", **group, status="STALL"),
         "values": "_ _ 1 1 1 stale"},
        {"series": selector("dgm_consumer_group_status_info", **group, status="STOP"),
         "values": "_ _ _ _ _ 1 1 1 1 1"},
    ]  # fmt: skip
    stopped = firing(
        "DgmConsumerGroupStalled",
        group,
        3,
        summary="Consumer group orders-app is STOP (lag from the LSO)",
    )
    checks: list[dict[str, Any]] = [
        {"eval_time": f"{minute}m", "alertname": "DgmConsumerGroupStalled", "exp_alerts": []}
        for minute in (1, 4, 6)
    ]
    checks += [
        {"eval_time": "7m", "alertname": "DgmConsumerGroupStalled", "exp_alerts": [stopped]},
        {"eval_time": "9m", "alertname": "DgmConsumerGroupStalled", "exp_alerts": [stopped]},
    ]
    run_rule_tests(
        promtool,
        tmp_path,
        [{"interval": "1m", "input_series": series, "alert_rule_test": checks}],
    )


def test_analysis_stale_past_the_threshold_dgm_verdicts_uses(tmp_path: Path, promtool: str) -> None:
    # Analyses every 10 s taking 20 s: stale after 90 s. The last one finishes at 3 min.
    threshold = stale_after_s(10, 20)
    assert threshold == 90
    finished = [min(minute, 3) * 60 for minute in range(MINUTES)]
    series = [
        {"series": selector("dgm_last_analysis_timestamp_seconds"),
         "values": " ".join(str(t) for t in finished)},
        {"series": selector("dgm_analysis_stale_after_seconds"),
         "values": f"{threshold:g}x{MINUTES - 1}"},
    ]  # fmt: skip
    checks: list[dict[str, Any]] = [
        {"eval_time": f"{minute}m", "alertname": "DgmAnalysisStale", "exp_alerts": []}
        for minute in (3, 4)  # 60 s old at 4 min: within the threshold
    ]
    checks += [
        {
            "eval_time": f"{minute}m",
            "alertname": "DgmAnalysisStale",
            "exp_alerts": [firing("DgmAnalysisStale", {}, minute * 60 - 180)],
        }
        for minute in (5, 6)  # 120 s, 180 s old
    ]
    run_rule_tests(
        promtool,
        tmp_path,
        [{"interval": "1m", "input_series": series, "alert_rule_test": checks}],
    )
