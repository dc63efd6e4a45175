"""How long one collector sampling cycle takes: 1,000 and 10,000 partitions, 100 groups.

Starts its own single-broker embedded Kafka in a temporary directory (stopped at the end),
creates topics of 100 partitions each, gives 100 consumer groups committed offsets and
leaves a few transactions open, then times `Collector.cycle()` (every sampler plus the
Parquet writes) and each stage on its own.

    python -m bench.collectors_cycle [--sizes 1000,10000] [--cycles 5] [--heap 2g]

Current figures: bench/README.md; their history: bench/HISTORY.md, "Collectors: one sampling
cycle".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from collectors.clients import Clients
from collectors.cycle import Collector, utc_now
from collectors.groups import fetch_groups
from collectors.offsets import fetch_offsets
from collectors.partitions import PartitionInfo, describe_cluster
from collectors.transactions import fetch_transactions
from dgm.config.collectors import CollectorSettings
from dgm.contracts.samples import SampleStore
from dgm.util.waiting import wait_until
from embedded_kafka.cluster import EmbeddedCluster

PARTITIONS_PER_TOPIC = 100
GROUPS = 100
OPEN_TRANSACTIONS = 10
T = TypeVar("T")


def timed(call: Callable[[], T]) -> tuple[T, float]:
    began = time.perf_counter()
    result = call()
    return result, time.perf_counter() - began


def grow_to(admin: AdminClient, prefix: str, partitions: int, have: int) -> list[str]:
    """Create topics of 100 partitions until the cluster has `partitions`; the new names."""
    names = [f"{prefix}-{i:03d}" for i in range(have // PARTITIONS_PER_TOPIC, partitions // 100)]
    for start in range(0, len(names), 10):  # 1,000 partitions per request: the broker keeps up
        batch = names[start : start + 10]
        futures = admin.create_topics(
            [NewTopic(n, PARTITIONS_PER_TOPIC, 1) for n in batch], operation_timeout=300
        )
        for future in futures.values():
            future.result(timeout=300)

    def all_led() -> bool:
        topics = admin.list_topics(timeout=30).topics
        return all(
            n in topics and all(p.leader >= 0 for p in topics[n].partitions.values()) for n in names
        )

    wait_until(all_led, 600, f"{partitions} partitions to have leaders", interval=1)
    # Leaders in the metadata come before the leaders know it (NOT_LEADER for a while);
    # measure the steady state a running collector sees, not partition creation.
    every = [PartitionInfo(n, p, None) for n in names for p in range(PARTITIONS_PER_TOPIC)]
    wait_until(lambda: fetch_offsets(admin, every, 60)[1] == 0, 600, "every partition to answer", 1)
    return names


def give_groups_offsets(bootstrap: str, topics: list[str]) -> None:
    """100 groups, each with committed offsets on all partitions of one topic."""
    for index in range(GROUPS):
        topic = topics[index % len(topics)]
        offsets = [TopicPartition(topic, p, 0) for p in range(PARTITIONS_PER_TOPIC)]
        seeder = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-g{index:03d}"})
        try:
            seeder.commit(offsets=offsets, asynchronous=False)
        finally:
            seeder.close()


def open_transactions(bootstrap: str, topic: str) -> list[Producer]:
    producers = []
    for index in range(OPEN_TRANSACTIONS):
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
                # Kafka's maximum: still open when the 10,000-partition run samples them.
                "transaction.timeout.ms": 900_000,
            }
        )
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.produce(topic, value=b"x", partition=index)
        producer.flush(60)
        producers.append(producer)
    return producers


def measure(bootstrap: str, state_dir: Path, cycles: int) -> dict[str, Any]:
    settings = CollectorSettings(include_topics=("^bench-",))
    clients = Clients({"bootstrap.servers": bootstrap}, request_timeout_s=60)
    collector = Collector(clients, settings, SampleStore(state_dir), request_timeout_s=60)
    try:
        collector.connect()
        timings, summary = [], None
        for _ in range(cycles):
            summary, seconds = timed(collector.cycle)
            timings.append(seconds)
        view, metadata_s = timed(lambda: describe_cluster(clients.admin, settings, 60))
        at = utc_now()
        _, groups_s = timed(lambda: fetch_groups(clients, 60, at, "c"))
        _, offsets_s = timed(lambda: fetch_offsets(clients.admin, view.partitions, 60))
        _, txns_s = timed(lambda: fetch_transactions(clients, view, 900_000, at, "c"))
        stages = {
            "metadata": metadata_s,
            "groups": groups_s,
            "offsets (3 ListOffsets)": offsets_s,
            "producers+transactions": txns_s,
        }
        # The rest of a cycle: deriving rows and events, and six fsynced Parquet writes.
        stages["derive+write (median cycle - stages)"] = statistics.median(timings) - sum(
            stages.values()
        )
        return {
            "summary": summary.line() if summary else "",
            "cycle_s": timings,
            "stages_s": stages,
        }
    finally:
        clients.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="partition counts, ascending")
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--heap", default="2g", help="broker heap (10,000 partitions need it)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="dgm-bench-collectors-") as tmp:
        cluster = EmbeddedCluster(Path(tmp) / "kafka", brokers=1, heap=args.heap)
        _, start_s = timed(lambda: cluster.start(fresh=True))
        print(f"broker started in {start_s:.1f}s (heap {args.heap})", flush=True)
        producers: list[Producer] = []
        try:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
            topics: list[str] = []
            have = 0
            for size in sizes:
                began = time.perf_counter()
                new = grow_to(admin, "bench", size, have)
                create_s = time.perf_counter() - began
                topics += new
                have = size
                print(f"{size} partitions: {len(new)} topics created in {create_s:.1f}s")
                if not producers:
                    give_groups_offsets(cluster.bootstrap_servers, topics)
                    producers = open_transactions(cluster.bootstrap_servers, topics[0])
                result = measure(
                    cluster.bootstrap_servers, Path(tmp) / f"state-{size}", args.cycles
                )
                cycle_s = result["cycle_s"]
                print(f"  {result['summary']}")
                print(
                    f"  cycle over {len(cycle_s)} runs: median {statistics.median(cycle_s):.2f}s, "
                    f"min {min(cycle_s):.2f}s, max {max(cycle_s):.2f}s "
                    f"(all: {', '.join(f'{s:.2f}' for s in cycle_s)})"
                )
                stages = ", ".join(f"{k} {v:.2f}s" for k, v in result["stages_s"].items())
                print(f"  stages once: {stages}", flush=True)
        finally:
            cluster.stop()  # the open transactions go with the broker
    return 0


if __name__ == "__main__":
    sys.exit(main())
