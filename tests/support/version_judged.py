"""One cell of the compatibility matrix judged (tests/scenarios/test_versions.py): on a broker
of the cell's version, the lab's three topic modes (at-most-once, at-least-once,
exactly-once: each processor SIGKILLed at its mode's telling spot) and the transactional
copier with random aborts (lab/txn_copier, Kafka's Java clients of the broker's version,
SIGKILLed once while records flow) run side by side with the collectors sampling; then one
`dgm analyze --once` judges the four pipelines, and each must equal the truth of an
independent read of its topics (the truths of tests/scenarios/test_lab_verdicts.py and
tests/scenarios/test_transactions_versions.py, which run at full size)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from dgm.config.loader import append_pipeline, load_config
from embedded_kafka.cluster import EmbeddedCluster
from embedded_kafka.versions import KafkaRelease
from lab.ledger import read_ledger
from lab.run import LabReport
from lab.txn_copier.run import CopierLabReport, CopierLabSettings, run_copier_lab
from spark_jobs.job import AnalysisJob
from tests.support.copier_seen import assert_sessions_are_restarts, copier_pipeline, dgm_saw
from tests.support.copier_truth import sessions_of, transaction_version, truth_of
from tests.support.kafka_cluster import KafkaUnderTest
from tests.support.published_lab import (
    EXPECTED_VERDICT,
    collecting,
    lab_config,
    lab_run,
    offsets_samples,
    pipeline_verdict,
    wait_for_cycles,
)
from tests.support.truth import by_id, extra_copies, topic_ids

MODES = ("at-most-once", "at-least-once", "exactly-once")
# 300 records at 60/s: 5 s of records, one SIGKILL landing while they flow.
CRASHES = 1
LAB: dict[str, Any] = {"messages": 300, "rate": 60.0, "crashes": CRASHES}
COPIER_MESSAGES, COPIER_KILLS, PARTITIONS = 600, 1, 3
COPIER = "copier"


def judged_on(cluster: EmbeddedCluster, release: KafkaRelease, spark: Any, root: Path) -> str:
    """The four runs on `cluster`, analyzed and each held to its truth: what was judged, a
    line."""
    began = time.monotonic()
    kafka = KafkaUnderTest(cluster.bootstrap_servers, cluster)
    root.mkdir(parents=True, exist_ok=True)
    state_dir, config_path = lab_config(root)
    reports, copier = run_side_by_side(kafka, release, root, config_path, state_dir)
    append_pipeline(config_path, copier_pipeline(COPIER, copier))
    lab_s = time.monotonic() - began
    config = load_config(config_path)
    job = AnalysisJob(config, kafka.bootstrap_servers, "local[2]", spark=spark)
    job.progress = lambda line: None
    job.run_once()
    analysis_s = time.monotonic() - began - lab_s
    told = [judged_mode(kafka, state_dir, mode, reports[mode]) for mode in MODES]
    told.append(judged_copier(kafka.bootstrap_servers, state_dir, copier))
    return "; ".join(told) + f"; lab {lab_s:.0f} s, analysis {analysis_s:.0f} s"


def run_side_by_side(
    kafka: KafkaUnderTest, release: KafkaRelease, root: Path, config_path: Path, state_dir: Path
) -> tuple[dict[str, LabReport], CopierLabReport]:
    """The four runs at once (own topics, groups and folders), the collectors sampling every
    second until a full cycle after the last commit."""
    copier = CopierLabSettings(
        kafka.bootstrap_servers, root / "copier", release.version, messages=COPIER_MESSAGES,
        rate=100.0, kills=COPIER_KILLS, partitions=PARTITIONS, seed=39,
        progress=lambda line: None,
    )  # fmt: skip
    with collecting(kafka.bootstrap_servers, load_config(config_path), interval_s=1.0):
        with ThreadPoolExecutor(len(MODES) + 1) as pool:
            labs = {m: pool.submit(lab_run, kafka, root, config_path, m, m, **LAB) for m in MODES}
            copied = pool.submit(run_copier_lab, copier)
            reports = {mode: future.result() for mode, future in labs.items()}
            report = copied.result()
        wait_for_cycles(state_dir, offsets_samples(state_dir) + 2)
    return reports, report


def judged_mode(kafka: KafkaUnderTest, state_dir: Path, mode: str, report: LabReport) -> str:
    """The mode's published verdict against its ledger and a read_committed read of its sink
    (as tests/scenarios/test_lab_verdicts.py holds it)."""
    assert [c["signal"] for c in report.crashes] == ["SIGKILL"] * CRASHES, report.crashes
    acked = set(read_ledger(Path(report.ledger_path)).acked)
    assert report.sink_topic is not None
    sink = by_id(topic_ids(kafka, report.sink_topic))
    row = pipeline_verdict(state_dir, report.pipeline)
    truth = (len(acked), extra_copies(sink), len(acked - set(sink)), 0)
    seen = (row["records_checked"], row["duplicate_copies"], row["lost"], row["aborted_reads"])
    said = f"{mode} {row['achieved']} (checked, duplicates, lost, aborted reads {seen})"
    assert seen == truth, f"{said}; truth {truth}"
    assert row["upstream_duplicates"] == 0, said  # idempotent source producer
    assert (row["achieved"], row["meets_declared"]) == EXPECTED_VERDICT[mode], said
    return said


def judged_copier(bootstrap: str, state_dir: Path, report: CopierLabReport) -> str:
    """The copier's verdict against the truth of tests/support/copier_truth.py, the
    transaction protocol its sink's batches show against the cluster's feature level, and the
    new producer sessions dgm told: its restarts only."""
    feature = transaction_version(bootstrap)
    sessions = sessions_of(bootstrap, report.sink_topic, PARTITIONS)
    truth = truth_of(bootstrap, report)
    row = pipeline_verdict(state_dir, COPIER)
    seen = dgm_saw(state_dir, COPIER, report)
    counts = (row["records_checked"], row["duplicate_copies"], row["lost"], row["aborted_reads"])
    expected = (len(truth.expected), truth.duplicates, len(truth.lost), truth.aborted_reads)
    said = (
        f"copier V{sessions.protocol} ({report.transactions['committed']} committed, "
        f"{report.transactions['aborted']} aborted; sink batches {sessions.told()}; dgm's "
        f"samples {seen['producers']}; new sessions told {seen['epoch_events']}) "
        f"{row['achieved']} {counts}"
    )
    assert report.caught_up and [k["returncode"] for k in report.kills] == [-9], said
    protocol = sessions.protocol
    assert protocol in (1, 2) and ((feature or 0) >= 2) == (protocol == 2), f"{said}, {feature}"
    assert report.transactions["aborted"] > 0 and truth.sink_aborted > 0, said
    assert truth.ledger_agrees and truth.aborted_only, said
    assert counts == expected == (len(truth.expected), 0, 0, 0), f"{said}; truth {expected}"
    assert (row["achieved"], row["meets_declared"]) == ("exactly-once", True), said
    assert_sessions_are_restarts(seen, sessions, report, protocol, said)
    return said
