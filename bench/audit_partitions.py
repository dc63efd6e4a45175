"""The audit's cost per partition: a cycle's read of many partitions holding a few new
records each, as the soak's 600 partitions give it, with the Spark Kafka source's default
group id (a new one per query: no executor consumer is ever reused) against a stable one
(spark_jobs/audit/kafka_source.audit_group, so the consumer pool keeps each partition's
consumer from cycle to cycle), side by side in one session, taking turns.

    python -m bench.audit_partitions [--topics 200] [--partitions 3] [--records 5]
        [--cycles 6] [--master local[2]]

Each cycle appends `--records` records to every partition, then each variant reads exactly
the new ranges (a count, the audit's read without its columns). The first cycle of each
variant warms it and is left out of the medians.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from bench.one_broker import one_broker, spark_session
from lab.offsets import high_watermarks
from spark_jobs.audit.kafka_source import read_range
from spark_jobs.audit.ranges import OffsetRange

VARIANTS = {"query group (Spark's default)": False, "stable group (dgm's)": True}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--records", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=6)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    names = [f"bench-parts-{i:03d}" for i in range(args.topics)]
    with (
        tempfile.TemporaryDirectory(prefix="dgm-bench-parts-") as tmp,
        one_broker(Path(tmp) / "broker", names, args.partitions) as servers,
        spark_session(args.master, "dgm-bench-partitions") as spark,
    ):
        admin = AdminClient({"bootstrap.servers": servers})
        producer = Producer({"bootstrap.servers": servers, "linger.ms": 20})
        base = {"kafka.bootstrap.servers": servers, "kafka.fetch.max.wait.ms": "10"}
        ends = {(t, p): 0 for t in names for p in range(args.partitions)}
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for cycle in range(args.cycles):
            for topic, partition in ends:
                for n in range(args.records):
                    producer.produce(topic, f"{cycle}-{n}".encode(), partition=partition)
            producer.flush(60)
            now = {
                (t, p): end
                for t in names
                for p, end in high_watermarks(admin, t, args.partitions).items()
            }
            ranges = [OffsetRange(t, p, ends[(t, p)], now[(t, p)]) for (t, p) in ends]
            for name, stable in VARIANTS.items():
                began = time.monotonic()
                read = read_range(spark, base, ranges, "read_committed", stable_group=stable)
                counted = read.count()
                times[name].append(time.monotonic() - began)
                assert counted == sum(r.end - r.start for r in ranges), counted
            ends = now
            told = ", ".join(f"{n} {t[-1]:.2f}s" for n, t in times.items())
            print(f"cycle {cycle}: {told}", flush=True)
    partitions = args.topics * args.partitions
    print(f"\n{partitions} partitions, {args.records} new records each a cycle, {args.master}:")
    for name, measured in times.items():
        print(f"  {name}: median {statistics.median(measured[1:]):.2f}s (cycles after the first)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
