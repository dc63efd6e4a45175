"""MirrorMaker 2 (Kafka's own connect-mirror, dedicated mode) between two embedded clusters,
judged by a real `dgm analyze` with claim = "deadline", each topic read from its own cluster
and both clusters sampled by one collector process, against the truth (a plain read of the
source on cluster a and the replica on cluster b):

- SIGKILLed mid-replication, its source stamping no dgm header (ids in the JSON values):
  duplicates = the truth's extra copies, 0 lost, every one reprocessing, and every block of
  three or more extra copies at consecutive replica offsets named as a replay run with its
  ranges (docs/design.md, "Causes without dgm's headers");
- SIGKILLed with exactly-once source support (KIP-618): exactly-once, 0 duplicates, 0 lost;
- stopped for good: its missing records are not lost before max_delay has passed since the
  first of them, and all of them are lost ("not in sink within max_delay") after.

The stopped run needs no catch-up: the first `dgm analyze` (before max_delay, that run alone)
runs while the killed ones recover; then dgm analyze restarts with all three.

The short version (one kill per run, 600 records) runs by default; DGM_LONG=1 runs the
lab's full strength (three kills, 3000 records).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from collectors.several import cluster_collectors, run_each_forever
from dgm.config.document import DgmConfig
from dgm.config.loader import append_pipeline, load_config
from dgm.config.pipelines import MessageIdRule, PipelineConfig
from dgm.contracts.published import PUBLISHED_FILE
from dgm.contracts.vocabulary import Achieved, LossCause
from dgm.util.waiting import wait_until
from lab.mirror.run import Fault, MirrorLabReport, MirrorLabSettings, run_mirror_lab
from spark_jobs.job import AnalysisJob
from tests.support.header_free import (
    delivery_by_json_id,
    duplicates_rows,
    id_of,
    replayed_blocks,
)
from tests.support.kafka_cluster import KafkaUnderTest
from tests.support.published_lab import offsets_samples, pipeline_verdict
from tests.support.strength import by_strength
from tests.support.truth import Record, read_records
from tests.support.truth_records import Delivery, delivery

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MAX_DELAY = timedelta(seconds=5)
TARGET = "b"  # cluster b's name in dgm.toml; cluster a is the default one


@contextmanager
def collecting(config: DgmConfig, servers: dict[str, str]) -> Iterator[None]:
    """Both clusters sampled every second by the collectors' own multi-cluster loop."""
    stop = threading.Event()
    collectors = cluster_collectors(
        {name: {"bootstrap.servers": s} for name, s in servers.items()},
        config.collectors,
        config.state_dir,
        stop,
        report=lambda cluster, line: None,
    )
    thread = threading.Thread(
        target=run_each_forever, args=(collectors.runners, stop), name="collectors", daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(60)
        collectors.close()
        assert not thread.is_alive(), "the collectors did not stop"


def mirror(
    kafka: KafkaUnderTest,
    second_kafka: KafkaUnderTest,
    lab_dir: Path,
    fault: Fault,
    exactly_once: bool,
    messages: int,
    kills: int,
    stamp_headers: bool = True,
) -> MirrorLabReport:
    report = run_mirror_lab(
        MirrorLabSettings(
            kafka.bootstrap_servers,
            second_kafka.bootstrap_servers,
            lab_dir,
            fault=fault,
            exactly_once=exactly_once,
            messages=messages,
            rate=150.0,
            kills=kills,
            seed=27,
            name=f"mirror-{fault}{'-eos' if exactly_once else ''}",
            stamp_headers=stamp_headers,
            progress=lambda line: None,
        )
    )
    assert report.messages["acked"] == messages
    assert report.exits == [], f"MirrorMaker 2 died on its own; see {report.run_dir}/logs"
    if fault == "kill":
        assert report.caught_up, f"not caught up; see {report.run_dir}/logs"
        assert len(report.kills) == kills
        assert all(k["returncode"] == -9 for k in report.kills)
    return report


def truth(
    kafka: KafkaUnderTest, second_kafka: KafkaUnderTest, report: MirrorLabReport, stamped: bool
) -> tuple[Delivery, dict[str, int]]:
    """What the replica holds of the source, and each source id's timestamp (ms)."""
    source = read_records(kafka.bootstrap_servers, report.source_topic)
    replica = read_records(second_kafka.bootstrap_servers, report.replica_topic)
    if stamped:
        found = delivery(source, replica, sink_by_key=False, filtered=False)
        sent = {r.header_id: r.timestamp_ms or 0 for r in source}
    else:
        found = delivery_by_json_id(source, replica)
        sent = {id_of(r): r.timestamp_ms or 0 for r in source}
    assert found.unexpected == frozenset()
    return found, sent


def judge_mirror_maker(
    kafka: KafkaUnderTest, second_kafka: KafkaUnderTest, spark: Any, root: Path, messages: int,
    kills: int,
) -> None:  # fmt: skip
    state_dir, config_path = root / "state", root / "dgm.toml"
    config_path.write_text(
        f'state_dir = "{state_dir}"\n\n'
        f'[cluster]\nbootstrap_servers = "{kafka.bootstrap_servers}"\n\n'
        f'[clusters.{TARGET}]\nbootstrap_servers = "{second_kafka.bootstrap_servers}"\n\n'
        "[analysis]\ngrace_s = 0\nwindow_s = 60\nmin_records = 1\n"
    )
    config = load_config(config_path)
    servers = {"default": kafka.bootstrap_servers, TARGET: second_kafka.bootstrap_servers}
    lab = root / "lab"
    # (fault, exactly-once, kills, messages, declared); the stop lands 1-3 s after the
    # replica's first record: twice the records keep the producer going well past it.
    runs: dict[str, tuple[Fault, bool, int, int, str]] = {
        "mm2-killed": ("kill", False, kills, messages, "at-least-once"),
        "mm2-eos": ("kill", True, kills, messages, "exactly-once"),
        "mm2-stopped": ("stop", False, 0, 2 * messages, "at-least-once"),
    }
    plain, stopped = "mm2-killed", "mm2-stopped"  # the plain one stamps no dgm header

    def judged(name: str, report: MirrorLabReport) -> None:
        """`name` monitored by dgm from now on."""
        append_pipeline(
            config_path,
            PipelineConfig(
                name=name,
                source_topics=(report.source_topic,),
                sink_topics=(report.replica_topic,),
                sink_cluster=TARGET,
                declared_semantic=runs[name][4],  # type: ignore[arg-type]
                claim="deadline",
                max_delay="5s",
                message_id=MessageIdRule("json_field", "id") if name == plain else MessageIdRule(),
            ),
        )

    def sampled_after_the_last_record() -> None:
        """Two samples of each cluster after the last record reached Kafka."""
        ended = offsets_samples(state_dir) + 4
        wait_until(lambda: offsets_samples(state_dir) >= ended, 60, "samples of both clusters")

    began = time.monotonic()
    with collecting(config, servers), ThreadPoolExecutor(len(runs)) as pool:
        # Three MirrorMaker 2 instances side by side: each run has its own topics, Connect
        # group and internal topics; most of a run is waiting for a worker to start.
        started = {
            name: pool.submit(mirror, kafka, second_kafka, lab, fault, eos, count, n, name != plain)
            for name, (fault, eos, n, count, _) in runs.items()
        }
        # The stopped run waits for no catch-up: it is judged before max_delay while the
        # killed ones restart and catch up (the exactly-once one may wait out the killed
        # instance's open transaction), by a first dgm analyze that monitors it alone.
        stop_report = started[stopped].result()
        sampled_after_the_last_record()
        judged(stopped, stop_report)
        stop_truth, sent_at = truth(kafka, second_kafka, stop_report, True)
        assert stop_truth.lost and len(stop_truth.sink_copies) > 0  # stopped mid-run
        first_missing_ms = min(sent_at[i] for i in stop_truth.lost)
        early_job = AnalysisJob(
            load_config(config_path), kafka.bootstrap_servers, "local[2]", spark=spark
        )
        early_job.progress = lambda line: print(line) if line.startswith("analysis ") else None
        # Just before the first missing record is max_delay old: nothing is lost yet.
        before = datetime.fromtimestamp(first_missing_ms / 1000, UTC) + MAX_DELAY
        early_job.run_once(now=before - timedelta(milliseconds=500))
        early_job.close()
        early = pipeline_verdict(state_dir, stopped)
        assert early["lost"] == 0 and early["records_checked"] > 0
        reports = {name: done.result() for name, done in started.items()}
        sampled_after_the_last_record()
    print(f"\nthree MirrorMaker 2 runs in {time.monotonic() - began:.0f}s")
    for name, report in reports.items():
        if name != stopped:
            judged(name, report)

    # Then dgm analyze, restarted with all three (a new job rebuilds from the kept
    # fingerprints), once every record is older than max_delay; the killed runs' truths
    # are read meanwhile.
    job = AnalysisJob(load_config(config_path), kafka.bootstrap_servers, "local[2]", spark=spark)
    job.progress = lambda line: print(line) if line.startswith("analysis ") else None
    with ThreadPoolExecutor(len(runs)) as pool:
        reading = {
            name: pool.submit(truth, kafka, second_kafka, r, name != plain)
            for name, r in reports.items()
            if name != stopped
        }
        replica_read = pool.submit(
            read_records, second_kafka.bootstrap_servers, reports[plain].replica_topic
        )
        last_ms = max(sent_at.values())
        settled_ms = last_ms + MAX_DELAY.total_seconds() * 1000 + 500
        wait_until(lambda: time.time() * 1000 > settled_ms, 30, "every record older than max_delay")
        job.run_once()
        truths = {name: read.result() for name, read in reading.items()}
        truths[stopped] = (stop_truth, sent_at)
        replica = replica_read.result()

    for name, report in reports.items():
        found, _ = truths[name]
        row = pipeline_verdict(state_dir, name)
        assert row["records_checked"] == found.source == runs[name][3], name
        assert (row["source_cluster"], row["sink_cluster"]) == ("default", TARGET)
        assert row["source_topics"] == [report.source_topic]
        assert row["sink"] == [f"{TARGET}/{report.replica_topic}"]
        assert row["duplicate_copies"] == found.duplicates, name
        assert row["lost"] == len(found.lost), name
    killed_row = pipeline_verdict(state_dir, "mm2-killed")
    assert killed_row["lost"] == 0
    replays_named(state_dir, f"{TARGET}/{reports[plain].replica_topic}", replica)
    killed_achieved = (
        Achieved.AT_LEAST_ONCE if killed_row["duplicate_copies"] else Achieved.EXACTLY_ONCE
    )
    assert (killed_row["achieved"], killed_row["meets_declared"]) == (killed_achieved.value, True)
    eos = pipeline_verdict(state_dir, "mm2-eos")
    assert (eos["duplicate_copies"], eos["lost"], eos["aborted_reads"]) == (0, 0, 0)
    assert (eos["achieved"], eos["meets_declared"]) == (Achieved.EXACTLY_ONCE.value, True)
    late = pipeline_verdict(state_dir, stopped)
    cause = LossCause.NOT_IN_SINK_WITHIN_MAX_DELAY.value
    assert late["causes"] == {(cause, "default"): len(stop_truth.lost)}
    stopped_achieved = Achieved.NO_GUARANTEE if late["duplicate_copies"] else Achieved.AT_MOST_ONCE
    assert late["achieved"] == stopped_achieved.value
    print(
        f"\nMirrorMaker 2 by deadline: killed {killed_row['duplicate_copies']} duplicates "
        f"(truth {truths['mm2-killed'][0].duplicates}), 0 lost; exactly-once {eos['achieved']}; "
        f"stopped: {early['records_checked']} checked and 0 lost before max_delay, "
        f"{late['lost']} lost after (truth {len(stop_truth.lost)})"
    )


def replays_named(state_dir: Path, topic: str, replica: list[Record]) -> None:
    """Each block of three or more extra copies of `topic` at consecutive offsets is named a
    replay run with exactly its replica offsets; the copies of shorter blocks (neither a
    producer id nor a group to tell by) stay unknown."""
    extra = [r for r in duplicates_rows(state_dir / PUBLISHED_FILE, topic) if r["is_extra_copy"]]
    named = {(r["partition"], r["offset"]): r["evidence"] for r in extra}
    blocks = [b for b in replayed_blocks(replica) if b[2] - b[1] >= 2]
    in_blocks = {(p, o) for p, first, last in blocks for o in range(first, last + 1)}
    for r in extra:
        wanted = "reprocessing" if (r["partition"], r["offset"]) in in_blocks else "unknown"
        assert r["cause"] == wanted, r
    for partition, first, last in blocks:
        wanted = f"rewritten at {topic}/{partition} offsets {first}-{last} "
        assert all(wanted in named[(partition, o)] for o in range(first, last + 1)), (
            wanted,
            named.get((partition, first)),
        )
    print(f"MirrorMaker 2 replays named: {[named[(p, f)].split(';')[0] for p, f, _ in blocks]}")


def test_mirror_maker_verdicts_by_deadline(
    kafka: KafkaUnderTest, second_kafka: KafkaUnderTest, spark: Any, tmp_path: Path
) -> None:
    # CI: one kill into 600 records; DGM_LONG=1: three kills into 3000.
    messages, kills = by_strength((600, 1), (3000, 3))
    judge_mirror_maker(kafka, second_kafka, spark, tmp_path, messages=messages, kills=kills)
