"""Audit throughput: dgm's `audit()` of a whole topic against Kafka's own consumer perf test.

Starts its own single-broker embedded Kafka in a temporary directory (die_with_parent, stopped
at the end), creates a topic of 6 partitions and fills it with small records stamped with
dgm's headers (dgm-id, dgm-producer, dgm-seq, as lab/producer.py stamps them) from a fast
confluent-kafka loop (the lab producer paces and tracks every send, too slow for millions).
One real collector cycle (collectors.cycle.Collector + SampleStore) writes the offsets
sample the audit plans its ranges from. Then, alternating, --reps times each:

- `spark_jobs.audit.kafka_read.audit()` of the whole range into a fresh state dir (samples copied
  in): Spark Kafka source read, fingerprints, Parquet batch written and committed;
- Kafka's ConsumerPerformance (`dgm broker tool consumer-perf-test`) on the same topic, from
  the broker's own jars; its own nMsg.sec and the wall time including the JVM start.

With --transactional N, a second topic of N records written in transactions (every 10th
aborted) is audited the same way: the audit reads it twice (read_uncommitted, then
read_committed to mark aborted records), against a plain topic of the same size.

    python bench/audit_throughput.py [--records 3000000] [--reps 3] [--transactional 1000000]

Current figures: bench/README.md; their history: bench/HISTORY.md, "Audit: throughput against
Kafka's consumer".
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collectors.clients import Clients
from collectors.cycle import Collector
from dgm import headers
from dgm.config_schema import CollectorSettings, DgmConfig, PipelineConfig
from dgm.samples import SAMPLES_DIR, SampleStore
from embedded_kafka.cluster import EmbeddedCluster
from embedded_kafka.tools import tool_command

PARTITIONS = 6


def fill(bootstrap: str, topic: str, records: int, transactional: bool = False) -> float:
    """`records` stamped records round-robin over the partitions; seconds taken."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000,
        "enable.idempotence": True,
    }
    if transactional:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    session = uuid.uuid4().hex[:12].encode()
    began = time.perf_counter()
    if transactional:
        producer.init_transactions(60)
    per_transaction = 10_000
    for start in range(0, records, per_transaction):
        if transactional:
            producer.begin_transaction()
        for n in range(start, min(records, start + per_transaction)):
            partition = n % PARTITIONS
            stamped = [
                (headers.ID, b"m%d" % n),
                (headers.PRODUCER, session),
                (headers.SEQ, b"%d" % (n // PARTITIONS)),
            ]
            while True:
                try:
                    producer.produce(topic, value=b"v%d" % n, partition=partition, headers=stamped)
                    break
                except BufferError:
                    producer.poll(0.05)
        if transactional:
            if (start // per_transaction) % 10 == 9:
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


def run_audit(spark: Any, bootstrap: str, samples: Path, root: Path, topic: str) -> dict[str, Any]:
    from spark_jobs.audit.kafka_read import audit

    state = root / f"audit-{uuid.uuid4().hex[:8]}"
    shutil.copytree(samples / SAMPLES_DIR, state / SAMPLES_DIR)
    pipeline = PipelineConfig(
        name="bench", source_topics=(topic,), consumer_group="g", declared_semantic="exactly-once"
    )
    config = DgmConfig(state_dir=state, pipelines=(pipeline,))
    began = time.perf_counter()
    result = audit(spark, config, bootstrap)
    seconds = time.perf_counter() - began
    shutil.rmtree(state)
    records = sum(result.records.values())
    return {"records": records, "seconds": seconds, "twice": bool(result.transactional)}


def run_perf(bootstrap: str, topic: str, records: int) -> dict[str, Any]:
    command = tool_command(
        "consumer-perf-test",
        [
            *("--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(records)),
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
        "tool_nmsg_s": float(columns["nMsg.sec"]),
        "tool_fetch_nmsg_s": float(columns.get("fetch.nMsg.sec", "nan")),
        "tool_mb_s": float(columns["MB.sec"]),
    }


def median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def compare(
    spark: Any, bootstrap: str, samples: Path, root: Path, topic: str, records: int, reps: int
) -> None:
    audits, perfs = [], []
    warm = run_audit(spark, bootstrap, samples, root, topic)  # JIT, Kafka source classes
    print(f"  warm-up audit: {warm['records']:,} records in {warm['seconds']:.1f}s", flush=True)
    for rep in range(reps):
        a = run_audit(spark, bootstrap, samples, root, topic)
        p = run_perf(bootstrap, topic, records)
        audits.append(a)
        perfs.append(p)
        print(
            f"  rep {rep}: audit {a['records']:,} records in {a['seconds']:.1f}s "
            f"({a['records'] / a['seconds']:,.0f}/s{', read twice' if a['twice'] else ''}); "
            f"consumer-perf-test {p['records']:,} in {p['seconds']:.1f}s wall "
            f"({p['records'] / p['seconds']:,.0f}/s), tool's own nMsg.sec "
            f"{p['tool_nmsg_s']:,.0f}, fetch.nMsg.sec {p['tool_fetch_nmsg_s']:,.0f}",
            flush=True,
        )
    audit_rate = statistics.median(a["records"] / a["seconds"] for a in audits)
    wall_rate = statistics.median(p["records"] / p["seconds"] for p in perfs)
    tool_rate = median(perfs, "tool_nmsg_s")
    print(
        f"  medians of {reps}: audit {audit_rate:,.0f} records/s; consumer-perf-test "
        f"{tool_rate:,.0f} records/s (its own), {wall_rate:,.0f} records/s (wall with JVM); "
        f"perf test / audit = {tool_rate / audit_rate:.1f}x (own), "
        f"{wall_rate / audit_rate:.1f}x (wall)",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=3_000_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--transactional", type=int, default=0, help="records; 0: skip")
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    from spark_jobs.session import build_session

    with tempfile.TemporaryDirectory(prefix="dgm-bench-audit-") as tmp:
        root = Path(tmp)
        cluster = EmbeddedCluster(root / "kafka", brokers=1, heap=args.heap, die_with_parent=True)
        began = time.perf_counter()
        cluster.start(fresh=True)
        print(f"broker started in {time.perf_counter() - began:.1f}s", flush=True)
        spark = None
        try:
            bootstrap = cluster.bootstrap_servers
            admin = AdminClient({"bootstrap.servers": bootstrap})
            topics = {"plain": "bench-audit-plain"}
            if args.transactional:
                topics |= {"txn": "bench-audit-txn", "plain-small": "bench-audit-plain-small"}
            futures = admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics.values()])
            for future in futures.values():
                future.result(timeout=60)
            seconds = fill(bootstrap, topics["plain"], args.records)
            print(
                f"{args.records:,} records into {topics['plain']} ({PARTITIONS} partitions) in "
                f"{seconds:.1f}s ({args.records / seconds:,.0f}/s)",
                flush=True,
            )
            if args.transactional:
                seconds = fill(bootstrap, topics["txn"], args.transactional, transactional=True)
                print(f"{args.transactional:,} records in transactions in {seconds:.1f}s")
                fill(bootstrap, topics["plain-small"], args.transactional)
            samples = root / "samples-state"
            sample(bootstrap, samples, list(topics.values()))
            spark = build_session(master=args.master, app_name="dgm-bench-audit")
            print(f"Spark {spark.version} on {spark.sparkContext.master}", flush=True)
            print(f"\nplain topic, {args.records:,} records:", flush=True)
            compare(spark, bootstrap, samples, root, topics["plain"], args.records, args.reps)
            if args.transactional:
                for name in ("plain-small", "txn"):
                    print(f"\n{name} topic, {args.transactional:,} records:", flush=True)
                    compare(
                        spark, bootstrap, samples, root, topics[name], args.transactional, args.reps
                    )
        finally:
            if spark is not None:
                spark.stop()
            cluster.stop()
    os.system("uptime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
