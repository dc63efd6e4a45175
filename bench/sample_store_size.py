"""The sample store's size over a long `dgm collect` run: flat once retention is reached.

Starts its own single-broker embedded Kafka (stopped at the end), keeps a light load running
(a producer at ~50 records/s over 3 topics of 3 partitions, a consumer group committing), and
runs the real `dgm collect` process at `--interval` seconds with `analysis.retention_h` =
`--retention-min` / 60. Every `--every` seconds it prints the files and bytes under
`<state_dir>/samples` and the rows the analysis would read; at the end a table.

    python -m bench.sample_store_size --minutes 60 --interval 1 --retention-min 15

Current figures: bench/README.md; their history: bench/HISTORY.md, "Samples: a bounded store".
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from dgm.contracts.sample_schemas import SCHEMAS
from dgm.contracts.samples import SampleStore
from embedded_kafka.cluster import EmbeddedCluster


def load(bootstrap: str, topics: list[str], stop: threading.Event) -> None:
    """~50 records/s and a group that reads and commits them."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-g", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(topics)
    n = 0
    while not stop.wait(0.1):
        for _ in range(5):
            producer.produce(topics[n % len(topics)], b"v%d" % n)
            n += 1
        producer.poll(0)
        while consumer.poll(0) is not None:
            pass
    producer.flush(10)
    consumer.close()


def measure(store: SampleStore) -> tuple[int, int, int]:
    """(files on disk, bytes on disk, files a reader lists) under the samples folder."""
    files = size = 0
    for path in store.root.rglob("*"):
        if path.is_file():
            files += 1
            size += path.stat().st_size
    listed = sum(len(store.files(kind)) for kind in SCHEMAS)
    return files, size, listed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--retention-min", type=float, default=15.0)
    parser.add_argument("--every", type=float, default=60.0)
    args = parser.parse_args()
    # SIGTERM ends the run like Ctrl-C: the broker and the collector are stopped either way.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="dgm-samples-") as tmp:
        cluster = EmbeddedCluster(Path(tmp) / "kafka", brokers=1)
        cluster.start(fresh=True)
        stop = threading.Event()
        collect: subprocess.Popen[bytes] | None = None
        try:
            topics = [f"bench-{uuid.uuid4().hex[:6]}-{i}" for i in range(3)]
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
            for future in admin.create_topics([NewTopic(t, 3, 1) for t in topics]).values():
                future.result(60)
            state = Path(tmp) / "state"
            config = Path(tmp) / "dgm.toml"
            config.write_text(
                f'state_dir = "{state}"\n[cluster]\nbootstrap_servers = '
                f'"{cluster.bootstrap_servers}"\n[analysis]\n'
                f"retention_h = {args.retention_min / 60}\n"
            )
            loader = threading.Thread(
                target=load, args=(cluster.bootstrap_servers, topics, stop), daemon=True
            )
            loader.start()
            command = [sys.executable, "-m", "shell.cli", "--config", str(config), "collect"]
            collect = subprocess.Popen(
                [*command, "--interval", str(args.interval)],
                stdout=open(Path(tmp) / "collect.log", "wb"),  # noqa: SIM115
                stderr=subprocess.STDOUT,
            )
            store = SampleStore(state)
            began = time.monotonic()
            print("minute  files  MiB  files_read", flush=True)
            while time.monotonic() - began < args.minutes * 60:
                time.sleep(args.every)
                assert collect.poll() is None, "dgm collect exited"
                files, size, listed = measure(store)
                minute = (time.monotonic() - began) / 60
                print(f"{minute:6.1f}  {files:5d}  {size / 2**20:5.2f}  {listed:5d}", flush=True)
            log = (Path(tmp) / "collect.log").read_text().splitlines()
            print(f"collector log: {len(log)} lines; last:")
            print("\n".join(log[-3:]))
        finally:
            stop.set()
            if collect is not None and collect.poll() is None:
                os.kill(collect.pid, signal.SIGTERM)
                collect.wait(60)
            cluster.stop()


if __name__ == "__main__":
    main()
