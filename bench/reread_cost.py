"""What the re-read of audited offsets (spark_jobs/audit/reread.py) costs an analysis cycle at
its default share, against the same cycle without it.

Starts its own 1-broker embedded Kafka (or uses DGM_BOOTSTRAP), a topic of `--partitions`
partitions that one pipeline reads, and two state directories analyzed by two AnalysisJobs in
one Spark session: one with `analysis.reread_share` at `--share` (0.1, the default), one at 0.
Each cycle writes `--new` stamped records, samples the offsets into both state directories
(one collector cycle each) and runs both analyses one after the other (alternating which goes
first, so a loaded machine weighs on both alike). The share's offsets are owed until they make
10,000, so one cycle in 10,000 / (share x new) reads them. Prints each cycle's two run times
and the re-read's own line, then the mean of each and the overhead.

    python -m bench.reread_cost --cycles 20 --new 10000 --partitions 12
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from collectors.clients import Clients
from collectors.cycle import Collector
from dgm.config.loader import load_config
from dgm.contracts import headers
from dgm.contracts.samples import SampleStore
from embedded_kafka.cluster import EmbeddedCluster
from lab.topics import create_topic


def write(bootstrap: str, topic: str, partitions: int, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for n in range(start, start + count):
        producer.produce(
            topic,
            value=b"v",
            partition=n % partitions,
            headers=[(headers.ID, f"m-{n}"), (headers.PRODUCER, "bench"),
                     (headers.SEQ, str(n // partitions))],
        )  # fmt: skip
        if n % 5000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def config_file(folder: Path, bootstrap: str, topic: str, share: float) -> Path:
    path = folder / "dgm.toml"
    path.write_text(
        f'state_dir = "{folder / "state"}"\n[cluster]\nbootstrap_servers = "{bootstrap}"\n'
        f'[collectors]\ninclude_topics = ["^{topic}"]\n'
        f"[analysis]\nreread_share = {share}\n"
        f'[[pipelines]]\nname = "p"\nsource_topics = ["{topic}"]\nsink_topics = ["{topic}-out"]\n'
        'consumer_group = "g"\ndeclared_semantic = "at-least-once"\n'
    )
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--new", type=int, default=10_000, help="records per cycle")
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--share", type=float, default=0.1)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    from spark_jobs.job import AnalysisJob
    from spark_jobs.session import build_session

    with tempfile.TemporaryDirectory(prefix="dgm-bench-reread-") as tmp:
        root = Path(tmp)
        cluster = None
        bootstrap = os.environ.get("DGM_BOOTSTRAP")
        if not bootstrap:
            cluster = EmbeddedCluster(root / "kafka", brokers=1, die_with_parent=True)
            cluster.start(fresh=True)
            bootstrap = cluster.bootstrap_servers
        spark = build_session(master=args.master, app_name="dgm-bench-reread")
        jobs: dict[str, Any] = {}
        collectors: dict[str, Collector] = {}
        lines: dict[str, list[str]] = {}
        try:
            topic = f"reread-{uuid.uuid4().hex[:6]}"
            from confluent_kafka.admin import AdminClient

            admin = AdminClient({"bootstrap.servers": bootstrap})
            create_topic(admin, topic, args.partitions, 1)
            create_topic(admin, f"{topic}-out", 1, 1)
            for name, share in (("share", args.share), ("none", 0.0)):
                folder = root / name
                folder.mkdir()
                config = load_config(config_file(folder, bootstrap, topic, share))
                lines[name] = []
                jobs[name] = AnalysisJob(
                    config, bootstrap, spark=spark, progress=lines[name].append
                )
                clients = Clients({"bootstrap.servers": bootstrap}, request_timeout_s=10)
                collectors[name] = Collector(
                    clients, config.collectors, SampleStore(config.state_dir), 10
                )
            times: dict[str, list[float]] = {"share": [], "none": []}
            reread_s: list[float] = []
            for cycle in range(args.cycles):
                write(bootstrap, topic, args.partitions, cycle * args.new, args.new)
                order = ["share", "none"] if cycle % 2 == 0 else ["none", "share"]
                for name in order:
                    collectors[name].cycle()
                    lines[name].clear()
                    began = time.monotonic()
                    jobs[name].run_once()
                    times[name].append(time.monotonic() - began)
                reread = [line for line in lines["share"] if "read again" in line]
                if reread and cycle > 0:
                    reread_s.append(float(reread[0].rsplit(" in ", 1)[1].split("s:")[0]))
                print(
                    f"cycle {cycle + 1}: share {times['share'][-1]:.2f}s, none "
                    f"{times['none'][-1]:.2f}s" + (f"  [{reread[0]}]" if reread else ""),
                    flush=True,
                )
            # The first cycle of each starts Spark's Kafka source and audits everything: left
            # out of the means.
            with_share = statistics.mean(times["share"][1:])
            without = statistics.mean(times["none"][1:])
            print(
                f"mean cycle (cycles 2-{args.cycles}): share {args.share}: {with_share:.2f}s, "
                f"share 0: {without:.2f}s, overhead {100 * (with_share - without) / without:+.1f}%"
            )
            # The re-read's own time, spread over the cycles it ran for: less noisy than the
            # difference of two means on a shared machine.
            spread = sum(reread_s) / (args.cycles - 1)
            print(
                f"re-reads: {len(reread_s)}, {statistics.mean(reread_s) if reread_s else 0:.2f}s "
                f"each; per cycle {spread:.2f}s = {100 * spread / without:.1f}% of a cycle "
                "without them"
            )
        finally:
            for job in jobs.values():
                job.close()
            for collector in collectors.values():
                collector.clients.close()
            spark.stop()
            if cluster is not None:
                cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
