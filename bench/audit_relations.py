"""Audit read cost of a demo-sized cycle: one Kafka relation per topic or per id rule, and
the fetch wait.

A cycle of `dgm demo` audits a few dozen new records in each of ~12 topics. This starts its
own 1-broker embedded Kafka, creates `--topics` topics of 3 partitions with `--records` new
records each (the lab's headers), and alternates, side by side in one Spark session, the two
ways of reading and fingerprinting those ranges: a union of one Spark Kafka relation per
topic (what the audit did), and one relation over all of them (what it does now, all topics
sharing the default header rule), and that one relation again with the audit's short
broker fetch wait (cluster_sources.AUDIT_CLIENT_DEFAULTS; the first two use the broker's default
500 ms). Each read is fingerprinted and counted per partition, as
the audit's chunk read is. Prints each repetition and the medians.

    python -m bench.audit_relations --topics 12 --records 50 --reps 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from functools import reduce
from pathlib import Path

from confluent_kafka import Producer

from bench.one_broker import one_broker, spark_session
from dgm.config.pipelines import MessageIdRule
from dgm.contracts import headers

PARTITIONS = 3


def fill(bootstrap: str, topics: list[str], records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for topic in topics:
        for i in range(records):
            producer.produce(
                topic,
                value=f"v{i}",
                partition=i % PARTITIONS,
                headers=[(headers.ID, f"{topic}-{i}"), (headers.PRODUCER, "bench"),
                         (headers.SEQ, str(i))],
            )  # fmt: skip
    assert producer.flush(60) == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=12)
    parser.add_argument("--records", type=int, default=50, help="per topic")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    from pyspark.sql import DataFrame

    from spark_jobs.audit.cluster_sources import AUDIT_CLIENT_DEFAULTS
    from spark_jobs.audit.kafka_source import read_range
    from spark_jobs.audit.ranges import OffsetRange
    from spark_jobs.audit.record_columns import fingerprints

    topics = [f"bench-relations-{n}" for n in range(args.topics)]
    with (
        tempfile.TemporaryDirectory(prefix="dgm-bench-relations-") as tmp,
        one_broker(Path(tmp) / "kafka", topics, PARTITIONS) as bootstrap,
    ):
        fill(bootstrap, topics, args.records)
        per = -(-args.records // PARTITIONS)
        ranges = [
            OffsetRange(t, p, 0, len(range(p, args.records, PARTITIONS)))
            for t in topics
            for p in range(PARTITIONS)
        ]
        assert all(0 < r.size <= per for r in ranges)
        with spark_session(args.master, "dgm-bench-relations") as spark:
            options = {"kafka.bootstrap.servers": bootstrap}
            rule = MessageIdRule()

            def one_topic(topic: str) -> DataFrame:
                mine = [r for r in ranges if r.topic == topic]
                return fingerprints(read_range(spark, options, mine, "read_uncommitted"), rule)

            def per_topic() -> DataFrame:
                return reduce(DataFrame.unionByName, (one_topic(t) for t in topics))

            def per_rule() -> DataFrame:
                return fingerprints(read_range(spark, options, ranges, "read_uncommitted"), rule)

            def short_wait() -> DataFrame:
                fast = {**AUDIT_CLIENT_DEFAULTS, **options}
                return fingerprints(read_range(spark, fast, ranges, "read_uncommitted"), rule)

            names = ("one relation per topic", "one per rule", "one per rule, 10 ms fetch wait")
            times: dict[str, list[float]] = {name: [] for name in names}
            expected = args.topics * args.records
            for rep in range(args.reps + 1):  # rep 0 warms up
                for name, build in zip(times, (per_topic, per_rule, short_wait), strict=True):
                    began = time.perf_counter()
                    rows = build().groupBy("topic", "partition").count().collect()
                    took = time.perf_counter() - began
                    assert sum(r["count"] for r in rows) == expected, rows
                    if rep:
                        times[name].append(took)
                    print(f"rep {rep} {name}: {took:.2f}s", flush=True)
            print(f"\n{args.topics} topics x {PARTITIONS} partitions, {expected} records:")
            for name, found in times.items():
                print(f"  {name}: median {statistics.median(found):.2f}s of {len(found)}")
    os.system("uptime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
