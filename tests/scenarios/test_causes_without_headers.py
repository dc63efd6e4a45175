"""Causes and sink order on pipelines that stamp no dgm header (docs/design.md, "Causes
without dgm's headers"), on real brokers, judged by a real `dgm analyze` run against a truth
dgm does not make: the lab's own log of its kills, and a plain read of the topics.

- A Kafka Streams at_least_once app whose source carries no dgm header, killed with SIGKILL:
  every extra copy's cause is reprocessing (0 unknown), naming the group event or the new
  producer session of the restart it followed; sink out of order equals the truth.
- A relay of Kafka's own console consumer (auto-commit) and console producer, its consumer
  killed with SIGKILL: the same.
- A producer with idempotence off whose Produce responses the lab's proxy drops: its
  duplicates are producer retries; with idempotence on: none, and its producer session
  listed from the batch headers of what it wrote.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dgm.config.loader import append_pipeline, load_config
from dgm.config.pipelines import MessageIdRule, PipelineConfig
from dgm.contracts.published import PUBLISHED_FILE
from dgm.util.waiting import wait_until
from lab.producer import ProducerResult, ProducerSettings, run_producer
from lab.proxy import proxies_for
from lab.streams.run import StreamsLabSettings, run_streams_lab
from spark_jobs.job import AnalysisJob
from tests.support import console_run
from tests.support.console_run import ConsoleRun
from tests.support.header_free import (
    duplicates_rows,
    id_of,
    sink_behind,
    sink_out_of_order,
)
from tests.support.proxied import FAST_RETRIES
from tests.support.published_lab import (
    collecting,
    offsets_samples,
    pipeline_verdict,
    wait_for_cycles,
)
from tests.support.strength import by_strength
from tests.support.truth import Record, read_records

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MESSAGES = by_strength(1500, 4000)
KILLS = by_strength(2, 3)
JSON_ID = MessageIdRule("json_field", "id")
INTERVAL_S = 1.0


def config_at(root: Path) -> Path:
    path = root / "dgm.toml"
    path.write_text(
        f'state_dir = "{root / "state"}"\n\n[analysis]\ngrace_s = 0\nwindow_s = 60\n\n'
        f"[collectors]\ninterval_s = {INTERVAL_S}\n"
    )
    return path


def analyzed(kafka: Any, spark: Any, config_path: Path, pipeline: PipelineConfig) -> Path:
    """The pipeline appended to the config, one analysis run: the published file."""
    append_pipeline(config_path, pipeline)
    config = load_config(config_path)
    job = AnalysisJob(config, kafka.bootstrap_servers, master="local[2]", spark=spark)
    job.progress = lambda line: None
    job.run_once()
    return config.state_dir / PUBLISHED_FILE


def judged_relay(
    kafka: Any, spark: Any, config_path: Path, name: str, source_topic: str, sink_topic: str,
    group: str,
) -> tuple[list[Record], list[Record], Path, list[dict[str, Any]], int]:  # fmt: skip
    """A killed relay's topics read plainly, then judged as an at-least-once pipeline with
    ids in the JSON values: (source, sink, published file, its extra copies' duplicates
    rows, the truth's extra copies)."""
    source = read_records(kafka.bootstrap_servers, source_topic)
    sink = read_records(kafka.bootstrap_servers, sink_topic)
    database = analyzed(
        kafka,
        spark,
        config_path,
        PipelineConfig(
            name=name,
            source_topics=(source_topic,),
            sink_topics=(sink_topic,),
            consumer_group=group,
            declared_semantic="at-least-once",
            message_id=JSON_ID,
        ),
    )
    extra = [r for r in duplicates_rows(database, sink_topic) if r["is_extra_copy"]]
    return source, sink, database, extra, len(sink) - len({id_of(r) for r in sink})


def test_streams_at_least_once_without_headers_names_every_duplicate_reprocessing(
    kafka: Any, spark: Any, tmp_path: Path
) -> None:
    config_path = config_at(tmp_path)
    with collecting(kafka.bootstrap_servers, load_config(config_path), INTERVAL_S):
        report = run_streams_lab(
            StreamsLabSettings(
                kafka.bootstrap_servers,
                tmp_path / "lab",
                "at_least_once",
                messages=MESSAGES,
                rate=100.0,
                kills=KILLS,
                seed=38,
                commit_interval_ms=3000,
                stamp_headers=False,
                progress=lambda line: None,
            )
        )
        assert report.caught_up, f"not caught up; see {report.run_dir}/logs"
        wait_for_cycles(tmp_path / "state", offsets_samples(tmp_path / "state") + 2)
    assert [k["returncode"] for k in report.kills] == [-9] * KILLS
    judged = judged_relay(
        kafka, spark, config_path, "streams-plain", report.source_topic, report.sink_topic,
        report.application_id,
    )  # fmt: skip
    source, sink, database, extra, extra_truth = judged
    assert all(not r.headers for r in source), "the source must carry no header"
    assert extra_truth > 0, "SIGKILLs between produce and commit must duplicate"
    print(f"{len(extra)} extra copies; causes and evidence:")
    for r in extra[:5]:
        print(f"  {r['message_id']}: {r['cause']}: {r['evidence']}")
    assert len(extra) == extra_truth
    assert {r["cause"] for r in extra} == {"reprocessing"}, {r["evidence"] for r in extra}
    # Each names the restart it followed: a group event sampled after a kill, or the new
    # producer session the restarted instance wrote with.
    kills = sorted(k["at"] for k in report.kills)
    for r in extra:
        told = r["evidence"]
        assert "of group" in told or "session changed" in told, told
        assert r["producer_id"] is not None  # Streams' producer is idempotent
        first_kill_s = kills[0] - 1.0
        assert r["arrived_at"].timestamp() > first_kill_s, (r, kills)
    behind = sink_behind(database, report.sink_topic)
    truth_behind = sink_out_of_order(source, sink)
    print(f"sink out of order: dgm {behind}, truth {truth_behind}")
    assert behind == truth_behind
    # The verdict, as test_streams_verdicts' stamped run (DGM_LONG) asserts it.
    row = pipeline_verdict(database.parent, "streams-plain")
    sent = {id_of(r) for r in source}
    assert {id_of(r) for r in sink} == sent  # the truth: nothing lost
    assert row["duplicate_copies"] == extra_truth and row["upstream_duplicates"] == 0
    assert row["lost"] == 0 and row["causes"] == {} and row["filtered"] == 0
    assert row["records_checked"] == len(sent)
    assert (row["achieved"], row["meets_declared"]) == ("at-least-once", True)


def test_console_relay_with_auto_commit_names_every_duplicate_reprocessing(
    kafka: Any, spark: Any, console_relay_run: ConsoleRun
) -> None:
    report, config_path = console_relay_run.report, console_relay_run.config_path
    assert [k["returncode"] for k in report.kills] == [-9] * console_run.KILLS
    source, sink, database, extra, extra_truth = judged_relay(
        kafka, spark, config_path, "console-relay", report.source_topic, report.sink_topic,
        report.group_id,
    )  # fmt: skip
    told = {r["evidence"] for r in extra}
    print(f"{len(extra)} extra copies (truth {extra_truth}); evidence: {sorted(told)[:4]}")
    assert extra_truth > 0 and len(extra) == extra_truth
    assert {r["cause"] for r in extra} == {"reprocessing"}, told
    # The restarted relay's console producer is a new idempotent session.
    assert all("session changed" in e or "of group" in e for e in told), told
    behind = sink_behind(database, report.sink_topic)
    assert behind == sink_out_of_order(source, sink)


def produce_through_proxy(
    kafka: Any, tmp_path: Path, idempotence: bool, drops: int = 6
) -> tuple[str, ProducerResult, int]:
    """Header-free records produced through the fault proxy dropping 1 in 5 Produce
    responses, until `drops` were dropped: (topic, result, responses dropped)."""
    topic = kafka.new_topic("proxied-plain", partitions=2)
    proxies = proxies_for(kafka.require_embedded())
    try:
        for proxy in proxies:
            proxy.drop_produce_responses(0.2)
        settings = ProducerSettings(
            bootstrap_servers=kafka.require_embedded().fault_bootstrap_servers,
            topic=topic,
            messages=20_000,
            ledger_path=tmp_path / f"ledger-{idempotence}.jsonl",
            rate=500.0,
            retries=20,
            enable_idempotence=idempotence,
            stamp_headers=False,
            client=FAST_RETRIES,
        )
        stop = threading.Event()
        results: list[ProducerResult] = []
        thread = threading.Thread(target=lambda: results.append(run_producer(settings, stop)))
        thread.start()
        try:
            wait_until(lambda: sum(p.dropped for p in proxies) >= drops, 60, "dropped acks")
        finally:
            stop.set()
            thread.join(90)
        assert results, "the producer did not finish"
        return topic, results[0], sum(p.dropped for p in proxies)
    finally:
        for proxy in proxies:
            proxy.stop()


def test_dropped_acks_without_headers_read_as_producer_retries_and_none_with_idempotence(
    kafka: Any, spark: Any, tmp_path: Path
) -> None:
    config_path = config_at(tmp_path)
    with collecting(kafka.bootstrap_servers, load_config(config_path), INTERVAL_S):
        plain, _, dropped = produce_through_proxy(kafka, tmp_path, idempotence=False)
        idempotent, result, _ = produce_through_proxy(kafka, tmp_path, idempotence=True)
        wait_for_cycles(tmp_path / "state", offsets_samples(tmp_path / "state") + 2)
    sink = kafka.new_topic("unused-sink")
    append_pipeline(
        config_path,
        PipelineConfig(
            name="retried",
            source_topics=(idempotent,),
            sink_topics=(sink,),
            consumer_group="nobody-reads-it",
            declared_semantic="at-least-once",
            message_id=JSON_ID,
        ),
    )
    database = analyzed(
        kafka,
        spark,
        config_path,
        PipelineConfig(
            name="plain",
            source_topics=(plain,),
            sink_topics=(sink,),
            consumer_group="nobody-reads-it",
            declared_semantic="at-least-once",
            message_id=JSON_ID,
        ),
    )
    records = read_records(kafka.bootstrap_servers, plain)
    extra_truth = len(records) - len({id_of(r) for r in records})
    rows = duplicates_rows(database, plain)
    extra = [r for r in rows if r["is_extra_copy"]]
    told = {r["evidence"] for r in extra}
    print(f"{dropped} acks dropped, {len(extra)} extra copies: {told}")
    assert extra_truth > 0 and len(extra) == extra_truth
    assert {r["cause"] for r in extra} == {"producer retry"}
    assert all("resent batch" in e for e in told)
    # Idempotent: the broker dropped the retried batches; its session is in the batches.
    assert duplicates_rows(database, idempotent) == []
    with duckdb.connect(str(database), read_only=True) as db:
        sessions = db.execute(
            "SELECT DISTINCT producer_id, producer_epoch FROM producer_sessions WHERE topic = ?",
            [idempotent],
        ).fetchall()
    print(f"idempotent producer: {result.acked} acked, sessions {sessions}")
    assert len(sessions) == 1 and sessions[0][0] >= 0 and sessions[0][1] == 0
