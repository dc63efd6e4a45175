"""Transactions V1 and V2 (KIP-890), each judged exactly: a transactional copier written with
Kafka's Java clients (lab/txn_copier), aborting a fifth of its transactions on purpose and
SIGKILLed while records flow, copying a source that holds aborted transactions too; then a real
collector loop and `dgm analyze --once` against the truth of an independent read of both topics.

Which protocol a run speaks is decided by the clients and the broker, and checked here from the
log itself (the record batch headers, read with the audit's own walker): on Kafka 3.9.2 the
copier (3.9.2 clients) speaks V1, one epoch per producer session whose markers carry the data's
epoch; on Kafka 4.4.0 (its `transaction.version` feature finalized at 2) the copier (4.4.0
clients) speaks V2, where every transaction's markers carry its data's epoch + 1 and the next
transaction writes at that epoch; the source's producer (confluent-kafka, librdkafka) speaks V1
on both. dgm must judge both the same: exactly-once, duplicates, losses
and aborted reads equal to the truth, and V2's per-transaction epoch bumps are neither a new
producer session nor a fault (docs/design.md, "Transactions V1 and V2").

A third run on 4.4.0 gives the copier read_uncommitted: it copies the source's aborted
records into its committed V2 transactions, and dgm's aborted reads must equal the truth's.

`DGM_LONG=1 python -m pytest -n 0 -s tests/scenarios/test_transactions_versions.py` prints, per
version, the producer ids and epochs dgm saw and the counts against the truth
(docs/compatibility.md); each run takes about a minute on 2 cores. These runs are DGM_LONG=1's:
CI judges a shorter copier run (600 records, 1 SIGKILL) on every supported version, V1 and V2,
with the same truths and the same rule for new sessions (tests/scenarios/test_versions.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dgm.config.loader import append_pipeline, load_config
from embedded_kafka.cluster import EmbeddedCluster
from embedded_kafka.versions import KRAFT, ZOOKEEPER, KafkaRelease
from lab.txn_copier.run import CopierLabReport, CopierLabSettings, run_copier_lab
from spark_jobs.job import AnalysisJob
from tests.support.copier_seen import assert_sessions_are_restarts, copier_pipeline, dgm_saw
from tests.support.copier_truth import sessions_of, transaction_version, truth_of
from tests.support.published_lab import (
    collecting,
    offsets_samples,
    pipeline_verdict,
    wait_for_cycles,
)
from tests.support.strength import LONG

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MESSAGES = 2000  # at 100/s: 20 s of records, long enough for the kills to land while they flow
KILLS = 3
PARTITIONS = 3

# CI judges the copier on every version, V1 and V2, in a shorter run (600 records, 1 SIGKILL):
# tests/scenarios/test_versions.py.
IN_THE_MATRIX = "the version matrix judges a shorter copier run; DGM_LONG=1 runs this one"


@dataclass(frozen=True)
class Case:
    release: KafkaRelease
    protocol: int  # the transaction protocol the copier must speak: 1 or 2
    # read_uncommitted: the copier copies the source's aborted records into its committed V2
    # transactions; dgm must count those aborted reads exactly, and no aborted sink record.
    isolation: str = "read_committed"


CASES = [
    # V1 is also what the lab's Python processors speak on every version (librdkafka 2.16
    # has no V2): at full strength only, to keep the default tier short.
    pytest.param(
        Case(KafkaRelease("3.9.2", ZOOKEEPER), 1),
        id="3.9.2-zookeeper-V1",
        marks=pytest.mark.skipif(not LONG, reason=IN_THE_MATRIX),
    ),
    pytest.param(
        Case(KafkaRelease("4.4.0", KRAFT), 2),
        id="4.4.0-kraft-V2",
        marks=pytest.mark.skipif(not LONG, reason=IN_THE_MATRIX),
    ),
    pytest.param(
        Case(KafkaRelease("4.4.0", KRAFT), 2, "read_uncommitted"),
        id="4.4.0-kraft-V2-read-uncommitted",
        marks=pytest.mark.skipif(not LONG, reason="DGM_LONG=1's (about 2 minutes)"),
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_copier_with_aborts_under_kill9_is_judged_exactly(
    case: Case, spark: Any, tmp_path: Path
) -> None:
    began = time.monotonic()
    cluster = EmbeddedCluster(
        tmp_path / "kafka", brokers=1, die_with_parent=True, release=case.release
    )
    cluster.start(fresh=True)
    try:
        bootstrap = cluster.bootstrap_servers
        feature = transaction_version(bootstrap)
        report, root = copied(bootstrap, case, tmp_path)
        lab_s = time.monotonic() - began
        name = "copier"
        config_path = root / "dgm.toml"
        append_pipeline(config_path, copier_pipeline(name, report))
        config = load_config(config_path)
        job = AnalysisJob(config, bootstrap, master="local[2]", spark=spark)
        job.progress = lambda line: None
        job.run_once()
        analysis_s = time.monotonic() - began - lab_s
        truth = truth_of(bootstrap, report)
        sessions = sessions_of(bootstrap, report.sink_topic, PARTITIONS)
        # The source's producer is the lab's, on confluent-kafka (librdkafka): V1 everywhere.
        source_sessions = sessions_of(bootstrap, report.source_topic, PARTITIONS)
    finally:
        cluster.stop()
    row = pipeline_verdict(config.state_dir, name)
    seen = dgm_saw(config.state_dir, name, report)
    told = (
        f"Kafka {case.release.version} ({case.release.mode}), transaction.version finalized "
        f"{feature}, copier on {report.clients_version} clients ({case.isolation}): "
        f"V{sessions.protocol}\n"
        f"  sink batches: {sessions.told()}\n"
        f"  source batches (librdkafka, V{source_sessions.protocol}): {source_sessions.told()}\n"
        f"  dgm's producers sample (sink): {seen['producers']}\n"
        f"  dgm's transactions sample ({report.transactional_id}): {seen['transactions']}\n"
        f"  dgm's epoch events: {seen['epoch_events']}\n"
        f"  dgm's faults for {name}: {seen['faults']}\n"
        f"  copier: {report.transactions}, {len(report.kills)} SIGKILLs "
        f"({report.kills_while_producing} while producing); source: {report.messages}\n"
        f"  truth: {len(truth.expected)} expected, {truth.duplicates} duplicates, "
        f"{len(truth.lost)} lost, {truth.aborted_reads} aborted reads, "
        f"{len(truth.aborted_only)} ids aborted in the source, {truth.sink_aborted} aborted "
        f"records in the sink's log\n"
        f"  dgm: {row['achieved']}, {row['records_checked']} checked, "
        f"{row['duplicate_copies']} duplicates, {row['lost']} lost, {row['aborted_reads']} "
        f"aborted reads, {row['faults_observed']} faults ({row['evidence']})\n"
        f"  cluster and lab run {lab_s:.0f} s, analysis {analysis_s:.0f} s, "
        f"whole test {time.monotonic() - began:.0f} s"
    )
    print(told)
    assert sessions.protocol == case.protocol, told
    assert ((feature or 0) >= 2) == (case.protocol == 2), told  # V2 needs the feature at 2
    assert source_sessions.protocol == 1, told
    assert report.caught_up and len(report.kills) == KILLS, told
    assert all(k["returncode"] == -9 for k in report.kills), told
    assert report.transactions["aborted"] > 0 and truth.sink_aborted > 0, told
    assert truth.ledger_agrees and truth.aborted_only, told
    assert truth.duplicates == 0 and not truth.lost, told
    assert row["records_checked"] == len(truth.expected), told
    assert row["duplicate_copies"] == truth.duplicates, told
    assert row["lost"] == len(truth.lost), told
    assert row["aborted_reads"] == truth.aborted_reads, told
    if case.isolation == "read_uncommitted":
        # Every aborted source record copied into a committed V2 transaction, each once.
        assert truth.aborted_reads == len(truth.aborted_only) > 0, told
        assert (row["achieved"], row["meets_declared"]) == ("no guarantee", False), told
    else:
        assert truth.aborted_reads == 0, told
        assert (row["achieved"], row["meets_declared"]) == ("exactly-once", True), told
    assert_sessions_are_restarts(seen, sessions, report, case.protocol, told)


def copied(bootstrap: str, case: Case, root: Path) -> tuple[CopierLabReport, Path]:
    """One copier run with the collectors sampling every second."""
    config_path = root / "dgm.toml"
    config_path.write_text(
        f'state_dir = "{root / "state"}"\n\n[analysis]\ngrace_s = 0\nwindow_s = 60\n'
    )
    with collecting(bootstrap, load_config(config_path), interval_s=1.0):
        report = run_copier_lab(
            CopierLabSettings(
                bootstrap,
                root / "lab",
                case.release.version,
                messages=MESSAGES,
                rate=100.0,
                kills=KILLS,
                partitions=PARTITIONS,
                seed=39,
                isolation=case.isolation,
                progress=print,
            )
        )
        wait_for_cycles(root / "state", offsets_samples(root / "state") + 2)
    return report, root
