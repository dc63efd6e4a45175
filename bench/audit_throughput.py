"""Audit throughput: dgm's `audit()` of a whole topic against the engine's floor (a plain
Spark read that writes the same fingerprint columns to Parquet) and Kafka's own consumer.

Starts its own single-broker embedded Kafka in a temporary directory (die_with_parent, stopped
at the end), creates topics of 6 partitions and fills them from a fast confluent-kafka loop
(the lab producer paces and tracks every send, too slow for millions):

- `plain`: 200-byte values with a short key, no headers; id rule `hash` (of key and value);
- `stamped`: small values stamped with dgm's headers (dgm-id, dgm-producer, dgm-seq, as
  lab/producer.py stamps them); id rule `header` dgm-id;
- with --transactional: `txn`, stamped records written in transactions of 10,000 (every 10th
  aborted), against the stamped topic's audit of as many records.

One real collector cycle (collectors.cycle.Collector + SampleStore) writes the offsets sample
the audit plans its ranges from. Then per topic, after one warm-up of each, --reps times, side
by side in one Spark session:

- `audit`: `spark_jobs.audit.audit.audit()` of the whole range into a fresh state dir
  (samples copied in), with the time of each of its steps (read, write, manifest, the rest);
- `floor`: the same offsets read by the Spark Kafka source (read_uncommitted, headers), the
  same `fingerprints()` columns and id, written to Parquet: one job, nothing else;
- with --perf-test: Kafka's ConsumerPerformance (`dgm broker tool consumer-perf-test`) on the
  same topic, from the broker's own jars; its own nMsg.sec.

    python -m bench.audit_throughput [--records 2000000] [--reps 3] [--transactional]

Current figures: bench/README.md; their history: bench/HISTORY.md, "Audit: throughput against
the engine's floor".
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench.one_broker import one_broker, spark_session
from collectors.clients import Clients
from collectors.cycle import Collector
from dgm.config.collectors import CollectorSettings
from dgm.config.document import DgmConfig
from dgm.config.pipelines import MessageIdRule, PipelineConfig
from dgm.contracts import headers
from dgm.contracts.samples import SAMPLES_DIR, SampleStore
from embedded_kafka.tools import tool_command

PARTITIONS = 6
VALUE_BYTES = 200
RULES = {
    "plain": MessageIdRule(kind="hash"),
    "stamped": MessageIdRule(),
    "txn": MessageIdRule(),
}


def fill(bootstrap: str, topic: str, records: int, shape: str) -> float:
    """`records` records of `shape` round-robin over the partitions; seconds taken."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000,
        "enable.idempotence": True,
    }
    transactional = shape == "txn"
    if transactional:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    session = uuid.uuid4().hex[:12].encode()
    padding = b"x" * VALUE_BYTES
    began = time.perf_counter()
    if transactional:
        producer.init_transactions(60)
    per_transaction = 10_000
    for start in range(0, records, per_transaction):
        if transactional:
            producer.begin_transaction()
        for n in range(start, min(records, start + per_transaction)):
            partition = n % PARTITIONS
            if shape == "plain":
                value = (b"v%d:" % n + padding)[:VALUE_BYTES]
                kwargs: dict[str, Any] = {"key": b"k%d" % (n % 1000), "value": value}
            else:
                stamped = [
                    (headers.ID, b"m%d" % n),
                    (headers.PRODUCER, session),
                    (headers.SEQ, b"%d" % (n // PARTITIONS)),
                ]
                kwargs = {"value": b"v%d" % n, "headers": stamped}
            while True:
                try:
                    producer.produce(topic, partition=partition, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.05)
        if transactional:
            if (start // per_transaction) % 10 == 9:
                # Sent first, so the aborted records are in the log (an abort purges what is
                # still queued, and librdkafka then fails the next transaction's sequence).
                assert producer.flush(60) == 0
                producer.abort_transaction(60)
            else:
                producer.commit_transaction(60)
        else:
            producer.poll(0)
    assert producer.flush(120) == 0
    return time.perf_counter() - began


def sample(bootstrap: str, state_dir: Path, topics: list[str]) -> None:
    """One real collector cycle over `topics`: the offsets sample the audit reads."""
    clients = Clients({"bootstrap.servers": bootstrap}, request_timeout_s=30)
    settings = CollectorSettings(include_topics=tuple(f"^{t}$" for t in topics))
    collector = Collector(clients, settings, SampleStore(state_dir), request_timeout_s=30)
    try:
        assert collector.cycle() is not None
    finally:
        clients.close()


def _modules(*names: str) -> list[Any]:
    """The modules of `names` this checkout has."""
    found = []
    for name in names:
        with contextlib.suppress(ImportError):
            found.append(importlib.import_module(name))
    return found


class Steps:
    """Seconds spent in the audit's steps, by wrapping the functions that do them."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def wrapped(self) -> Iterator[None]:
        patched: list[tuple[Any, str, Any]] = []

        def wrap(owner: Any, name: str, step: str) -> None:
            original = getattr(owner, name, None)
            if original is None:  # an older checkout, measured for a before/after
                return

            def timed(*args: Any, **kwargs: Any) -> Any:
                began = time.perf_counter()
                try:
                    return original(*args, **kwargs)
                finally:
                    self.seconds[step] += time.perf_counter() - began

            patched.append((owner, name, original))
            setattr(owner, name, timed)

        # Each function is wrapped in the namespace it is called from. An older checkout (a
        # before/after) names the modules and functions otherwise: the first two names below
        # are the modules of before the audit's modules were named by role.
        reading = "read (per chunk: read, fingerprint, write, count)"
        for module in _modules("spark_jobs.audit.kafka_read"):
            wrap(module, "_read_chunks", reading)  # before the chunked read had a module
        for module in _modules("spark_jobs.audit.fingerprinted", "spark_jobs.audit.chunked_read"):
            wrap(module, "read_chunks", reading)
            wrap(module, "told_aborts", "aborted batches (the markers walked)")
        for module in _modules("spark_jobs.audit.scratch"):
            wrap(module.Scratch, "write_aborted", "aborted offsets (read_committed, anti join)")
        for module in _modules("spark_jobs.audit.fingerprint_store", "spark_jobs.audit.store"):
            wrap(module.FingerprintStore, "write_batch", "batch (adopt or write, commit)")
            for name in ("_manifest", "new_manifest"):
                wrap(module, name, "manifest (count what was written)")
        try:
            yield
        finally:
            for owner, name, original in reversed(patched):
                setattr(owner, name, original)

    def breakdown(self, total: float) -> dict[str, float]:
        steps = dict(self.seconds)
        # write_batch includes the manifest: show the write alone.
        manifest = steps.get("manifest (count what was written)", 0.0)
        write = "batch (adopt or write, commit)"
        steps[write] = steps.get(write, 0.0) - manifest
        steps["the rest (samples, plan, lock)"] = total - sum(steps.values())
        return steps


def run_audit(
    spark: Any, bootstrap: str, samples: Path, root: Path, topic: str, rule: MessageIdRule
) -> dict[str, Any]:
    from spark_jobs.audit.audit import audit

    state = root / f"audit-{uuid.uuid4().hex[:8]}"
    shutil.copytree(samples / SAMPLES_DIR, state / SAMPLES_DIR)
    pipeline = PipelineConfig(
        name="bench",
        source_topics=(topic,),
        consumer_group="g",
        declared_semantic="exactly-once",
        message_id=rule,
    )
    config = DgmConfig(state_dir=state, pipelines=(pipeline,))
    steps = Steps()
    began = time.perf_counter()
    with steps.wrapped():
        result = audit(spark, config, bootstrap)
    seconds = time.perf_counter() - began
    shutil.rmtree(state)
    records = sum(result.records.values())
    return {
        "records": records,
        "seconds": seconds,
        "transactional": bool(result.transactional),
        "steps": steps.breakdown(seconds),
    }


def run_floor(
    spark: Any, bootstrap: str, root: Path, topic: str, rule: MessageIdRule
) -> dict[str, Any]:
    """One Spark job: the Kafka source read of the whole topic, `fingerprints()`, Parquet."""
    from spark_jobs.audit.record_columns import fingerprints
    from spark_jobs.schemas import FINGERPRINT

    out = root / f"floor-{uuid.uuid4().hex[:8]}"
    began = time.perf_counter()
    records = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.fetch.max.wait.ms", "10")
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .load()
    )
    fingerprints(records, rule).select(*(f.name for f in FINGERPRINT.fields)).write.parquet(
        str(out)
    )
    seconds = time.perf_counter() - began
    written = spark.read.parquet(str(out)).count()
    shutil.rmtree(out)
    return {"records": written, "seconds": seconds}


def run_perf(bootstrap: str, topic: str, records: int) -> dict[str, Any]:
    command = tool_command(
        "consumer-perf-test",
        [
            *("--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records)),
            *("--timeout", "120000", "--group", f"perf-{uuid.uuid4().hex[:8]}"),
        ],
    )
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
    wall = time.perf_counter() - began
    lines = [line for line in done.stdout.strip().splitlines() if "," in line]
    if len(lines) < 2 or "data.consumed.in.nMsg" not in lines[-2]:
        raise RuntimeError(f"consumer-perf-test printed no result: {done.stdout}{done.stderr}")
    header, row = lines[-2:]
    columns = dict(
        zip(
            [c.strip() for c in header.split(",")],
            [v.strip() for v in row.split(",")],
            strict=False,
        )
    )
    return {
        "records": int(columns["data.consumed.in.nMsg"]),
        "seconds": wall,
        "rate": float(columns["nMsg.sec"]),
    }


def rate(run: dict[str, Any]) -> float:
    return float(run["records"] / run["seconds"])


def compare(
    spark: Any,
    bootstrap: str,
    samples: Path,
    root: Path,
    topic: str,
    rule: MessageIdRule,
    reps: int,
    perf_test: bool,
) -> dict[str, Any]:
    """Warm-ups, then `reps` side-by-side repetitions; the medians."""
    audit: Callable[[], dict[str, Any]] = lambda: run_audit(  # noqa: E731
        spark, bootstrap, samples, root, topic, rule
    )
    floor: Callable[[], dict[str, Any]] = lambda: run_floor(  # noqa: E731
        spark, bootstrap, root, topic, rule
    )
    a, f = audit(), floor()
    print(f"  warm-up: audit {a['seconds']:.1f}s, floor {f['seconds']:.1f}s", flush=True)
    audits, floors, perfs = [], [], []
    for rep in range(reps):
        a, f = audit(), floor()
        audits.append(a)
        floors.append(f)
        if a["records"] != f["records"]:
            raise RuntimeError(f"audit read {a['records']} records, the floor {f['records']}")
        line = (
            f"  rep {rep}: audit {a['records']:,} in {a['seconds']:.1f}s ({rate(a):,.0f}/s"
            f"{', transactional' if a['transactional'] else ''}); floor {f['seconds']:.1f}s "
            f"({rate(f):,.0f}/s); audit/floor {rate(a) / rate(f):.2f}"
        )
        if perf_test:
            p = run_perf(bootstrap, topic, a["records"])
            perfs.append(p)
            line += f"; consumer-perf-test {p['rate']:,.0f}/s"
        print(line, flush=True)
        for step, seconds in a["steps"].items():
            print(f"      {step}: {seconds:.2f}s", flush=True)
    medians = {
        "audit": statistics.median(rate(a) for a in audits),
        "floor": statistics.median(rate(f) for f in floors),
        "audit_seconds": statistics.median(a["seconds"] for a in audits),
        "ratio": statistics.median(rate(a) / rate(f) for a, f in zip(audits, floors, strict=True)),
    }
    print(
        f"  medians of {reps}: audit {medians['audit']:,.0f}/s ({medians['audit_seconds']:.1f}s),"
        f" floor {medians['floor']:,.0f}/s; audit/floor {medians['ratio']:.2f} (pairwise)",
        flush=True,
    )
    steps = sorted({s for a in audits for s in a["steps"]})
    for step in steps:
        print(f"    {step}: median {statistics.median(a['steps'][step] for a in audits):.2f}s")
    if perfs:
        perf = statistics.median(p["rate"] for p in perfs)
        print(f"  consumer-perf-test {perf:,.0f}/s: {perf / medians['audit']:.1f}x the audit")
    return medians


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--transactional", action="store_true", help="also a transactional topic of --records"
    )
    parser.add_argument("--shapes", default="plain,stamped")
    parser.add_argument("--perf-test", action="store_true", help="also consumer-perf-test")
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    shapes = [s for s in args.shapes.split(",") if s]
    if args.transactional:
        shapes = [*sorted({*shapes, "stamped"}, key=list(RULES).index), "txn"]
    topics = {shape: f"bench-audit-{shape}" for shape in shapes}
    with (
        tempfile.TemporaryDirectory(prefix="dgm-bench-audit-") as tmp,
        one_broker(Path(tmp) / "kafka", topics.values(), PARTITIONS, args.heap) as bootstrap,
    ):
        root = Path(tmp)
        for shape, topic in topics.items():
            seconds = fill(bootstrap, topic, args.records, shape)
            print(f"{args.records:,} {shape} records into {topic} in {seconds:.1f}s")
        samples = root / "samples-state"
        sample(bootstrap, samples, list(topics.values()))
        with spark_session(args.master, "dgm-bench-audit") as spark:
            print(f"Spark {spark.version} on {spark.sparkContext.master}", flush=True)
            found = {}
            for shape, topic in topics.items():
                print(f"\n{shape} topic, {args.records:,} records:", flush=True)
                found[shape] = compare(
                    spark, bootstrap, samples, root, topic, RULES[shape], args.reps,
                    args.perf_test,
                )  # fmt: skip
            for other in ("stamped", "plain"):
                if "txn" in found and other in found:
                    ratio = found["txn"]["audit_seconds"] / found[other]["audit_seconds"]
                    print(f"transactional / {other} audit time: {ratio:.2f}x")
    os.system("uptime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
