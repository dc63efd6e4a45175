"""The monitor's own fault suite, Jepsen-style: dgm's services (collectors, analysis,
dashboard, supervised as `dgm run` supervises them) watch the lab's at-least-once and
exactly-once pipelines on 3 brokers while the services are SIGKILLed at random, brokers are
SIGKILLed and restarted (the leader moves), and the whole cluster is SIGKILLed for a while.
Then the sources go quiet, the processors catch up, and what dgm publishes must equal the
truth read directly from the topics and the producers' ledgers; no sample lost or doubled;
no loss ever shown for pipelines that lose nothing; every service back without a hand.

CI runs a short version (40 s of faults, 4 kills: each service once, 1 broker restart, 8 s
outage, the brokers' own restart on top). The full run:
`DGM_LONG=1 python -m pytest -n 0 -s tests/scenarios/test_fault_suite.py` (10 min, 24 kills,
2 broker restarts, 2-minute outage); DGM_FAULT_MINUTES / _KILLS / _OUTAGE_S / _SEED
override. The report is printed and written to `$DGM_FAULT_REPORT` if set
(bench/HISTORY.md, "The monitor under faults", has one).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from dgm.config.analysis import AnalysisSettings
from dgm.config.loader import ENV_STATE_DIR
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.published import PUBLISHED_FILE
from dgm.util.ports import free_ports
from dgm.util.waiting import wait_until
from lab.continuous import ContinuousLab, ContinuousSettings, DemoPipeline
from lab.ledger import read_ledger
from shell.demo_command import demo_config
from shell.services import ServiceGroup
from shell.stack import dashboard_answers, dashboard_url, monitoring_services
from tests.support.fault_suite import (
    SERVICES,
    Plan,
    Record,
    group_lag,
    kill_service,
    outage,
    published_verdicts,
    render,
    restart_leader,
    sample_rows,
    watch_verdicts,
)
from tests.support.kafka_cluster import KafkaUnderTest
from tests.support.truth import by_id, extra_copies, read_records, sequence_gaps, topic_ids
from watch.publish import published_seen

PLAN = Plan.from_env()
PIPELINES = (
    DemoPipeline("faults-at-least-once", "at-least-once"),
    DemoPipeline("faults-exactly-once", "exactly-once"),
)
PARTITIONS = 3
# Each source's acknowledged records before the quiet: past the verdict's min_records.
ENOUGH_RECORDS = 2 * AnalysisSettings().min_records

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def say(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def truth_of(kafka: KafkaUnderTest, pipeline: PipelineConfig, lab_dir: Path) -> dict[str, Any]:
    """What a direct read of the pipeline's topics and its producer's ledger says."""
    source = by_id(topic_ids(kafka, pipeline.source_topics[0]))
    sink_copies = topic_ids(kafka, pipeline.sink_topics[0])
    sink = by_id(sink_copies)
    ledger = read_ledger(lab_dir / pipeline.name / "ledger.jsonl")
    assert set(ledger.acked) <= set(source), "an acknowledged record is missing from the source"
    # A transaction aborted while the brokers were away purges what it had not sent yet: the
    # lab's producer leaves those dgm-seqs unwritten, which dgm rightly counts as lost.
    written = read_records(kafka.bootstrap_servers, pipeline.source_topics[0], "read_uncommitted")
    return {
        "truth_sequence_gaps": sequence_gaps(written),
        "truth_checked": len(source),
        "truth_sink_records": sum(sink.values()),
        "truth_extra": extra_copies(sink),
        "truth_upstream": extra_copies(source),
        "truth_lost": len(set(source) - set(sink)),
        "truth_aborted_reads": sum(n for i, n in sink.items() if i in ledger.aborted_ids),
        "truth_duplicated": {i: n for i, n in sink.items() if n > 1},
    }


def published_duplicates(state_dir: Path, pipeline: str) -> dict[str, int]:
    with duckdb.connect(str(state_dir / PUBLISHED_FILE), read_only=True) as db:
        rows = db.execute(
            "SELECT message_id, count(*) FROM duplicates WHERE pipeline = ? GROUP BY message_id",
            [pipeline],
        ).fetchall()
    return {message_id: n for message_id, n in rows}


def published_extra_copies(state_dir: Path, pipeline: str) -> set[tuple[int, int]]:
    with duckdb.connect(str(state_dir / PUBLISHED_FILE), read_only=True) as db:
        rows = db.execute(
            'SELECT partition, "offset" FROM duplicates WHERE pipeline = ? AND is_extra_copy',
            [pipeline],
        ).fetchall()
    return {(partition, offset) for partition, offset in rows}


def broker_faults(kafka: KafkaUnderTest, plan: Plan, began: float, record: Record) -> None:
    cluster, admin = kafka.embedded, kafka.admin()
    assert cluster is not None
    topic = f"{PIPELINES[0].name}-source"
    try:
        for at, fault in plan.broker_times():
            time.sleep(max(0.0, began + at - time.monotonic()))
            say(f"fault: {fault}")
            done = restart_leader(cluster, admin, topic) if fault != "outage" else None
            record.broker_faults.append(done or outage(cluster, plan.outage_s))
            say(f"fault done: {record.broker_faults[-1]}")
    except Exception as error:  # reported by the test's thread
        record.errors.append(f"broker fault failed: {error!r}")


@pytest.mark.timeout(int(PLAN.minutes * 60 + PLAN.outage_s + 1500))
def test_the_monitor_survives_its_faults_and_publishes_the_truth(
    kafka3: KafkaUnderTest, tmp_path: Path
) -> None:
    assert kafka3.embedded is not None
    began = time.monotonic()
    state_dir, lab_dir = tmp_path / "state", tmp_path / "lab"
    state_dir.mkdir()
    config = state_dir / "dgm.toml"
    config.write_text(demo_config(state_dir, kafka3.bootstrap_servers))
    lab = ContinuousLab(
        ContinuousSettings(
            kafka3.bootstrap_servers,
            lab_dir,
            pipelines=PIPELINES,
            partitions=PARTITIONS,
            cluster=kafka3.embedded,
            config_path=config,
            broker_restart_every=10**9,  # the suite restarts brokers itself
            seed=PLAN.seed,
            progress=say,
        )
    )
    pipelines = {p.name: p for p in lab.setup()}
    port = free_ports(1)[0]
    url = dashboard_url("127.0.0.1", port)
    group = ServiceGroup(state_dir / "logs", say)
    record, quiet = Record(), threading.Event()
    seen_rows: set[Any] = set()
    say(f"fault suite: {PLAN}")
    try:
        env = {**os.environ, ENV_STATE_DIR: str(state_dir)}
        for spec in monitoring_services(config, ("127.0.0.1", port), env):
            group.start(spec)
        lab.start()
        watcher = threading.Thread(target=watch_verdicts, args=(state_dir, record, quiet, say))
        watcher.start()
        faults_began = time.monotonic()
        brokers = threading.Thread(
            target=broker_faults, args=(kafka3, PLAN, faults_began, record), daemon=True
        )
        brokers.start()
        for at, name in PLAN.kill_times():
            time.sleep(max(0.0, faults_began + at - time.monotonic()))
            if name == "collectors":
                seen_rows |= set(sample_rows(state_dir))
                record.sample_snapshots += 1
            record.kills.append(kill_service(group, name, url))
            say(f"fault: SIGKILL {name}: {record.kills[-1]}")
        brokers.join()
        assert not record.errors, record.errors

        # Enough records to judge: a transactional source producer may have spent most of a
        # short run blocked by the faults (once 60 records, an "insufficient evidence" verdict).
        def enough_to_judge() -> bool:
            return all(
                len(read_ledger(lab_dir / name / "ledger.jsonl").acked) >= ENOUGH_RECORDS
                for name in pipelines
            )

        wait_until(enough_to_judge, 300, f"{ENOUGH_RECORDS} acknowledged records per source", 2)
        # Quiet: no more faults nor records; the processors catch up with their sources.
        lab.quiesce()
        say("quiet: waiting for the processors to catch up")
        admin: AdminClient = kafka3.admin()
        for p in pipelines.values():

            def caught_up_with_source(p: PipelineConfig = p) -> bool:
                return group_lag(admin, p.consumer_group, p.source_topics[0], PARTITIONS) == 0

            wait_until(caught_up_with_source, 400, f"{p.name}'s processor to catch up", 2)
        truth = {name: truth_of(kafka3, p, lab_dir) for name, p in pipelines.items()}
        lab.stop()
        say(f"truth: { ({n: t['truth_checked'] for n, t in truth.items()}) }; waiting for dgm")

        def caught_up() -> dict[str, dict[str, Any]] | None:
            verdicts = published_verdicts(state_dir) or {}
            # Every source record and every sink copy: a publication whose samples predate
            # a processor's last commit has checked every source record but not yet seen
            # the sink's last copies (its duplicates would come short of the truth's).
            done = all(
                name in verdicts
                and verdicts[name]["records_checked"] == t["truth_checked"]
                and verdicts[name]["sink_records"] == t["truth_sink_records"]
                and verdicts[name]["lost"] == t["truth_sequence_gaps"]  # once past the grace
                for name, t in truth.items()
            )
            return verdicts if done else None

        verdicts = wait_until(caught_up, 900, "a publication that checked every record", 2)
        quiet.set()
        watcher.join()

        for name, t in truth.items():
            row = verdicts[name]
            say(f"{name}: published {row} / truth {t}")
            # Nothing lost by the pipeline; what the producer never wrote is lost all the same.
            assert t["truth_lost"] == 0, name
            assert row["lost"] == t["truth_sequence_gaps"], name
            assert row["duplicate_copies"] + row["upstream_duplicates"] == t["truth_extra"], name
            assert row["upstream_duplicates"] == t["truth_upstream"] == 0, name
            assert row["aborted_reads"] == t["truth_aborted_reads"] == 0, name
            assert row["beyond_retention"] == 0, name
            assert published_duplicates(state_dir, name) == t["truth_duplicated"], name
            seen = record.max_lost_seen.get(name, 0)
            assert seen <= t["truth_sequence_gaps"], f"{name} showed a false loss"
        exactly_once = truth[PIPELINES[1].name]
        assert verdicts[PIPELINES[1].name]["achieved"] == (
            "exactly-once" if exactly_once["truth_sequence_gaps"] == 0 else "at-most-once"
        )

        final = sample_rows(state_dir)
        assert [row for row, n in final.items() if n > 1] == [], "a sample read twice"
        assert seen_rows <= set(final), "a sample read before a collector kill is gone"
        record.sample_rows_checked = len(final)

        assert set(group.pids()) == set(SERVICES)
        # What the watch told through its SIGKILL and the outages is true: each id it called
        # a duplicate is one in the sink, each extra copy one the analysis published.
        for name, t in truth.items():
            told = [r for r in published_seen(state_dir) if r["pipeline"] == name]
            assert {r["message_id"] for r in told} <= set(t["truth_duplicated"]), name
            extra = published_extra_copies(state_dir, name)
            assert {(r["partition"], r["offset"]) for r in told} <= extra, name
        record.watch_told = len(published_seen(state_dir))
        # Every restart was one of our SIGKILLs: no service fell over through the outages.
        own = [r for r in group.restarts if r.returncode != -9]
        record.own_exits = [f"{r.name} exited {r.returncode}" for r in own]
        assert record.own_exits == []
        assert dashboard_answers(url)
        took = time.monotonic() - began
        report = render(PLAN, record, {n: {**verdicts[n], **truth[n]} for n in truth}, took)
        print("\n" + report)
        if os.environ.get("DGM_FAULT_REPORT"):
            Path(os.environ["DGM_FAULT_REPORT"]).write_text(report)
    finally:
        quiet.set()
        lab.stop()
        group.stop()
        kafka3.embedded.start_stopped()  # the session's cluster, whole again for later tests
