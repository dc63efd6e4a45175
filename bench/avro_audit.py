"""Audit throughput of records framed for a schema registry: dgm's `audit()` of a topic of Avro
records (id rule `registry_field`) against topics of as many plain records of the same size,
side by side in one Spark session (issue 40: Avro ≥ 0.5x plain).

Starts its own single-broker embedded Kafka and embedded Apicurio Registry (both die with this
process, stopped at the end) and fills three topics of 6 partitions, --records each, every
value about --value-bytes long:

- `avro`: Avro orders (order_id, amount, a padding note) in Confluent's framing, the writer
  schema registered once; id rule `registry_field` order_id (decoded with Spark's from_avro);
- `json`: the same orders as JSON text; id rule `json_field` order_id (the plain record whose id
  is a field too);
- `plain`: raw bytes of the same length with a short key; id rule `hash` of key and value.

One real collector cycle writes the offsets sample the audits plan from; then, after a warm-up
of each, --reps audits of each topic into fresh state dirs, taking turns; the median
records/s of each and the ratios are printed.

    python -m bench.avro_audit [--records 1000000] [--reps 3] [--value-bytes 200]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench.audit_throughput import PARTITIONS, sample
from bench.one_broker import one_broker, spark_session
from dgm.config.cluster import ClusterConfig
from dgm.config.document import DgmConfig
from dgm.config.pipelines import MessageIdRule, PipelineConfig
from dgm.config.schema_registry import SchemaRegistryConfig
from dgm.contracts.samples import SAMPLES_DIR

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "bench.avro",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": "string"},
    ],
}
RULES = {
    "avro": MessageIdRule("registry_field", "order_id"),
    "json": MessageIdRule("json_field", "order_id"),
    "plain": MessageIdRule("hash"),
}


def register(registry_url: str, topic: str) -> int:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient({"url": registry_url})
    return int(client.register_schema(f"{topic}-value", Schema(json.dumps(ORDER), "AVRO")))


def values(shape: str, records: int, size: int, schema_id: int) -> Any:
    """(key, value) of each record, `size` bytes of value or about."""
    import fastavro

    parsed = fastavro.parse_schema(ORDER)
    frame = b"\x00" + schema_id.to_bytes(4, "big")
    for n in range(records):
        order_id = f"order-{n:09d}"
        if shape == "plain":
            yield b"k%d" % (n % 1000), (b"%d:" % n + b"x" * size)[:size]
            continue
        note = "x" * max(0, size - 40)
        if shape == "json":
            yield (
                None,
                json.dumps({"order_id": order_id, "amount": n * 0.25, "note": note}).encode(),
            )
            continue
        out = io.BytesIO()
        fastavro.schemaless_writer(
            out, parsed, {"order_id": order_id, "amount": n * 0.25, "note": note}
        )
        yield None, frame + out.getvalue()


def fill(bootstrap: str, topic: str, rows: Any) -> tuple[float, int]:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
         "queue.buffering.max.messages": 1_000_000, "enable.idempotence": True}
    )  # fmt: skip
    began, size = time.perf_counter(), 0
    for n, (key, value) in enumerate(rows):
        size += len(value)
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=n % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return time.perf_counter() - began, size


def run_audit(spark: Any, bootstrap: str, registry_url: str, samples: Path, root: Path,
              topic: str, rule: MessageIdRule) -> tuple[int, float]:  # fmt: skip
    from spark_jobs.audit.audit import audit

    state = root / f"audit-{uuid.uuid4().hex[:8]}"
    shutil.copytree(samples / SAMPLES_DIR, state / SAMPLES_DIR)
    pipeline = PipelineConfig(
        name="bench", source_topics=(topic,), consumer_group="g",
        declared_semantic="exactly-once", message_id=rule,
    )  # fmt: skip
    cluster = ClusterConfig(bootstrap, schema_registry=SchemaRegistryConfig(url=registry_url))
    config = DgmConfig(state_dir=state, cluster=cluster, pipelines=(pipeline,))
    began = time.perf_counter()
    result = audit(spark, config, bootstrap)
    seconds = time.perf_counter() - began
    shutil.rmtree(state)
    return sum(result.records.values()), seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--value-bytes", type=int, default=200)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    from embedded_registry.server import EmbeddedRegistry

    topics = {shape: f"bench-{shape}" for shape in RULES}
    with (
        tempfile.TemporaryDirectory(prefix="dgm-bench-avro-") as tmp,
        one_broker(Path(tmp) / "kafka", topics.values(), PARTITIONS, "1g") as bootstrap,
    ):
        root = Path(tmp)
        registry = EmbeddedRegistry(root / "registry")
        registry.start(progress=print)
        try:
            schema_id = register(registry.ccompat_url, topics["avro"])
            for shape, topic in topics.items():
                rows = values(shape, args.records, args.value_bytes, schema_id)
                seconds, size = fill(bootstrap, topic, rows)
                print(f"{args.records:,} {shape} records ({size / args.records:.0f} B a value) "
                      f"in {seconds:.1f}s", flush=True)  # fmt: skip
            samples = root / "samples-state"
            sample(bootstrap, samples, list(topics.values()))
            rates: dict[str, list[float]] = {shape: [] for shape in topics}
            with spark_session(args.master, "dgm-bench-avro") as spark:
                for rep in range(args.reps + 1):  # the first is a warm-up
                    order = list(topics) if rep % 2 == 0 else list(topics)[::-1]
                    for shape in order:
                        done, seconds = run_audit(
                            spark, bootstrap, registry.ccompat_url, samples, root,
                            topics[shape], RULES[shape],
                        )  # fmt: skip
                        assert done == args.records, (shape, done)
                        told = "warm-up" if rep == 0 else f"rep {rep}"
                        rate = f"{seconds:.1f}s, {done / seconds:,.0f} records/s"
                        print(f"  {told} {shape}: {rate}", flush=True)
                        if rep:
                            rates[shape].append(done / seconds)
        finally:
            registry.stop()
    median = {shape: statistics.median(found) for shape, found in rates.items()}
    print("\n| records | avro (registry_field) | json (json_field) | plain (hash) | avro / json "
          "| avro / plain |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {args.records:,} | {median['avro']:,.0f}/s | {median['json']:,.0f}/s | "
          f"{median['plain']:,.0f}/s | {median['avro'] / median['json']:.2f}x | "
          f"{median['avro'] / median['plain']:.2f}x |")  # fmt: skip
    os.system("uptime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
