"""run_lab end to end: faults done and reported with their times, the pipeline added to the
config, the broker faults on dgm's embedded clusters; and clear errors before any Kafka call."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dgm.config.loader import load_config
from dgm.contracts.headers import ID, PRODUCER, SEQ
from lab.ledger import read_ledger
from lab.pipeline import DECLARED
from lab.processors.settings import MODES
from lab.run import LabError, LabReport, LabSettings, fault_plan, run_lab
from tests.support.truth import read_headers


def settings(kafka: Any, tmp_path: Path, mode: str = "at-least-once", **extra: Any) -> LabSettings:
    return LabSettings(
        pipeline=extra.pop("pipeline", "lab-test"),
        mode=mode,  # type: ignore[arg-type]
        bootstrap_servers=kafka.bootstrap_servers,
        lab_dir=tmp_path / "lab",
        **{"messages": 400, "rate": 50.0, **extra},
    )


# --- before any Kafka call -------------------------------------------------------------------


def test_fault_plan_spreads_faults_over_the_production() -> None:
    plan = fault_plan(3, ("rebalance", "broker-restart", "drop-acks"))
    fractions = [fraction for fraction, _ in plan]
    assert fractions == sorted(fractions) and fractions[0] > 0 and fractions[-1] < 1
    assert Counter(kind for _, kind in plan) == {"kill": 3, "rebalance": 1, "broker-restart": 1}
    assert [kind for _, kind in plan][:2] != ["kill", "kill"], "interleaved, not all kills first"
    assert fault_plan(0, ()) == []


def test_every_mode_declares_a_semantic() -> None:
    assert set(DECLARED) == set(MODES)
    assert DECLARED["exactly-once-broken"] == DECLARED["idempotent-sink"] == "exactly-once"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"messages": 0}, "--messages: expected >= 1"),
        ({"faults": ("broker-restart",)}, "needs dgm's embedded cluster"),
        ({"faults": ("flood",)}, "--fault: unknown 'flood'"),
        ({"rate": -1.0}, "--rate: expected > 0"),
        ({"pipeline": "has space"}, "pipeline name"),
        ({"producer_max_in_flight": 0}, "--producer-max-in-flight: expected >= 1"),
    ],
)
def test_bad_settings_are_refused_before_anything_runs(
    tmp_path: Path, change: dict[str, Any], expected: str
) -> None:
    base = {"pipeline": "p", "mode": "at-least-once", "bootstrap_servers": "127.0.0.1:9"}
    with pytest.raises(LabError, match=expected):
        run_lab(LabSettings(lab_dir=tmp_path, **{**base, **change}))
    assert not any(tmp_path.iterdir()), "nothing is created for a refused run"


def test_kill_without_a_count_means_three_crashes() -> None:
    lab = LabSettings("p", "at-least-once", "b", Path("."), faults=("kill",))
    assert lab.planned_crashes == 3
    assert LabSettings("p", "at-least-once", "b", Path("."), crashes=5).planned_crashes == 5


# --- on the real broker ----------------------------------------------------------------------


def test_report_and_config_after_crashes_and_a_rebalance(kafka: Any, tmp_path: Path) -> None:
    config = tmp_path / "dgm.toml"
    config.write_text("# my pipelines\n")
    lab = settings(
        kafka, tmp_path, crashes=2, faults=("rebalance",), config_path=config,
        report_path=tmp_path / "report.json", messages=600, rate=40.0,
    )  # fmt: skip
    report = run_lab(lab)
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved == json.loads(report.to_json())
    assert saved["caught_up"] is True
    assert saved["messages"]["sent"] == saved["messages"]["acked"] == 600
    assert saved["bootstrap_servers"] == kafka.bootstrap_servers
    assert saved["source_topic"].startswith("lab-test-") and saved["sink_topic"]
    assert len(read_ledger(Path(saved["ledger_path"])).acked) == 600
    assert [c["signal"] for c in saved["crashes"]] == ["SIGKILL", "SIGKILL"]
    kinds = [fault["kind"] for fault in saved["faults"]]
    assert Counter(kinds) == {"kill": 2, "rebalance": 1}
    for fault in saved["faults"]:
        assert saved["started_at"] <= fault["at"] <= fault["ended_at"] <= saved["finished_at"]
    visit = next(f for f in saved["faults"] if f["kind"] == "rebalance")["detail"]
    assert visit["partitions"] and visit["returncode"] == 0

    assert config.read_text().startswith("# my pipelines\n")
    pipeline = load_config(config).pipeline("lab-test")
    assert pipeline.source_topics == (saved["source_topic"],)
    assert pipeline.sink_topics == (saved["sink_topic"],)
    assert pipeline.consumer_group == saved["consumer_group"]
    assert pipeline.declared_semantic == "at-least-once"
    assert saved["config_error"] is None


def test_idempotent_sink_is_configured_as_an_external_sqlite_table(
    kafka: Any, tmp_path: Path
) -> None:
    config = tmp_path / "dgm.toml"
    report = run_lab(
        settings(kafka, tmp_path, "idempotent-sink", messages=100, rate=None, config_path=config)
    )
    sink = load_config(config).pipeline("lab-test").external_sink
    assert sink is not None and sink.kind == "sqlite" and sink.id_column == "message_id"
    assert report.external_sink is not None and str(sink.path) == report.external_sink["path"]
    assert sink.source_columns == ("source_topic", "source_partition", "source_offset")
    assert load_config(config).pipeline("lab-test").declared_semantic == "exactly-once"


def test_a_config_that_cannot_be_written_does_not_lose_the_run(kafka: Any, tmp_path: Path) -> None:
    # Like compose's read-only mount, but failing for root too: the folder is a file.
    (tmp_path / "not-a-folder").write_text("")
    config = tmp_path / "not-a-folder" / "dgm.toml"
    report = run_lab(settings(kafka, tmp_path, messages=50, rate=None, config_path=config))
    assert report.config_error is not None
    assert report.caught_up
    saved = json.loads((Path(report.run_dir) / "report.json").read_text())
    assert saved["config_error"] == report.config_error


def test_broker_restart_loses_nothing_at_least_once(kafka3: Any, tmp_path: Path) -> None:
    cluster = kafka3.require_embedded()
    report = run_lab(
        settings(
            kafka3,
            tmp_path,
            crashes=1,
            faults=("broker-restart",),
            cluster=cluster,
            messages=600,
            rate=40.0,
        )
    )
    assert report.caught_up
    restart = next(f for f in report.faults if f["kind"] == "broker-restart")
    assert restart["detail"]["signal"] == "SIGKILL" and restart["ended_at"] > restart["at"]
    assert len(cluster.running_nodes()) == 3
    acked = set(read_ledger(Path(report.ledger_path)).acked)
    assert len(acked) == 600
    assert report.sink_topic is not None
    sink_ids = {r[ID].decode() for r in read_headers(kafka3.bootstrap_servers, report.sink_topic)}
    assert acked <= sink_ids, f"{len(acked - sink_ids)} acked messages lost"


def test_dropped_acks_without_idempotence_duplicate_the_source(kafka: Any, tmp_path: Path) -> None:
    cluster = kafka.require_embedded()
    report: LabReport = run_lab(
        settings(
            kafka,
            tmp_path,
            faults=("drop-acks",),
            cluster=cluster,
            producer_idempotence=False,
            messages=300,
            # Paced, so that the messages go in many Produce requests: unpaced, one or two
            # batches carry them all and no response may be dropped (seen: 0 of 2 dropped).
            rate=100.0,
            drop_probability=0.3,
        )
    )
    drop = next(f for f in report.faults if f["kind"] == "drop-acks")
    assert drop["detail"]["dropped_responses"] > 0
    source = read_headers(kafka.bootstrap_servers, report.source_topic)
    copies = Counter((r[PRODUCER], r[SEQ]) for r in source)
    assert any(n > 1 for n in copies.values()), "a retried batch must be written twice"
