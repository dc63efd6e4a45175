"""The rate dgm keeps up with: `dgm run` against many pipelines fed at a constant rate.

One embedded broker; `--pipelines` pipelines, each a source and a sink topic of
`--partitions` partitions (1 in 10 exactly-once, through a transactional relay; the rest
at-least-once, through a relay committing after it flushed); a producer writes `--rate`
records a second in all, spread over the sources, ids in the JSON values (no dgm header).
`dgm run` (collectors, analysis with alerts, exporter, dashboard) watches them all. Every
`--every` seconds this prints one row: the records produced, the audit's backlog (records in
the soak topics not yet fingerprinted: the topics' end offsets minus the newest analysis's
fingerprints), the verdict's age (now minus the newest analysis's end), that analysis's cycle
time, each service's resident memory (its process and children: the analysis' Spark JVM
with it) and the state directory's stores. Kept up means backlog and age stay bounded.

    python -m bench.soak [--pipelines 100] [--partitions 3] [--rate 500] [--minutes 30]
        [--every 30] [--master local[2] | --workers 2 [--worker-memory 2g]] [--out FILE.json]

With --out, the run's logs (dgm run's and each service's) are kept beside it in FILE.logs/.

`--workers N` starts a Spark standalone cluster on loopback (a master and N one-core workers,
tests/support/spark_standalone.py) and gives the analysis its master instead of `--master`.

Not a timed test: the figures go to bench/README.md and bench/HISTORY.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from bench.one_broker import one_broker
from dgm.contracts.published import PUBLISHED_FILE, open_read_only
from lab.offsets import high_watermarks
from tests.support.spark_standalone import standalone_cluster

TRANSACTIONAL_ONE_IN = 10
# Each service of `dgm run` by what its command line holds (the dashboard is streamlit's).
SERVICES = {
    "collect": " collect",
    "watch": " watch",
    "analyze": " analyze",
    "dashboard": "dashboard/app.py",
    "exporter": " exporter",
}


def topics(pipelines: int) -> list[tuple[str, str, str]]:
    """(kind "a" at-least-once or "t" transactional, source, sink) of every pipeline."""
    found = []
    for i in range(pipelines):
        kind = "t" if i % TRANSACTIONAL_ONE_IN == 0 else "a"
        found.append((kind, f"soak-{kind}-src-{i:03d}", f"soak-{kind}-sink-{i:03d}"))
    return found


def config_text(state_dir: Path, bootstrap: str, pipelines: int, master: str) -> str:
    text = (
        f'state_dir = "{state_dir}"\n[cluster]\nbootstrap_servers = "{bootstrap}"\n'
        f'[collectors]\ninclude_topics = ["^soak-"]\n[analysis]\nspark_master = "{master}"\n'
    )
    for kind, source, sink in topics(pipelines):
        group, semantic = (
            ("soak-eos", "exactly-once") if kind == "t" else ("soak-alo", "at-least-once")
        )
        text += (
            f'[[pipelines]]\nname = "{source.replace("-src-", "-")}"\n'
            f'source_topics = ["{source}"]\nsink_topics = ["{sink}"]\n'
            f'consumer_group = "{group}"\ndeclared_semantic = "{semantic}"\n'
            '[pipelines.message_id]\nkind = "json_field"\nname = "id"\n'
        )
    return text


def produce(bootstrap: str, pipelines: int, rate: float, counted: Path) -> None:
    """Role `producer`: `rate` records a second over the sources, the count in `counted`."""
    sources = [source for _, source, _ in topics(pipelines)]
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20}
    )
    began, n = time.monotonic(), 0
    while True:
        producer.produce(
            sources[n % len(sources)], json.dumps({"id": f"r{n}", "n": n}).encode(), str(n).encode()
        )
        n += 1
        if n % 100 == 0:
            producer.poll(0)
            counted.with_suffix(".new").write_text(str(n))
            counted.with_suffix(".new").replace(counted)  # never read half-written
        time.sleep(max(0.0, began + n / rate - time.monotonic()))


def relay(bootstrap: str, kind: str) -> None:
    """Role `relay-a` (commit after flush, at-least-once) or `relay-t` (transactions)."""
    group = "soak-eos" if kind == "t" else "soak-alo"
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "isolation.level": "read_committed",
    })  # fmt: skip
    settings = {"bootstrap.servers": bootstrap, "linger.ms": 20}
    if kind == "t":
        settings["transactional.id"] = "soak-relay-t"
    producer = Producer(settings)
    if kind == "t":
        producer.init_transactions()
    consumer.subscribe([f"^soak-{kind}-src-.*"])
    while True:
        messages = consumer.consume(500, 0.5)
        if not messages:
            continue
        if kind == "t":
            producer.begin_transaction()
        for m in messages:
            if m.error() is None:
                sink = (m.topic() or "").replace("-src-", "-sink-")
                producer.produce(sink, m.value(), m.key())
        if kind == "t":
            offsets = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata())
            producer.commit_transaction()
        else:
            producer.flush()
            consumer.commit(asynchronous=False)


def _children() -> dict[int, list[int]]:
    """pid -> its child pids, from one scan of /proc."""
    found: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            found.setdefault(parent, []).append(int(entry.name))
    return found


def _subtree(children: dict[int, list[int]], root: int) -> list[int]:
    """`root` and every process below it."""
    found, frontier = [root], [root]
    while frontier:
        below = children.get(frontier.pop(), [])
        found += below
        frontier += below
    return found


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def service_rss(run_pid: int) -> dict[str, float]:
    """MB resident per service of `dgm run`: each service process with its children."""
    children = _children()
    found = dict.fromkeys(SERVICES, 0.0)
    for pid in children.get(run_pid, []):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        name = next((s for s, told in SERVICES.items() if told in command), None)
        if name is not None:
            found[name] += sum(_rss_mb(p) for p in _subtree(children, pid))
    return found


def size_mb(path: Path) -> float:
    """The bytes under `path`, in MiB. Spark writes and removes its _temporary folders
    meanwhile: a file or folder gone while walked counts nothing (a run's observer once
    died of one)."""
    total = 0
    for folder, _, files in os.walk(path):  # os.walk skips folders that vanish
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(folder, name)).st_size
    if path.is_file():
        with contextlib.suppress(FileNotFoundError):
            total = path.stat().st_size
    return total / 2**20


def end_offsets(admin: AdminClient, names: list[str], partitions: int) -> int:
    """The soak topics' high watermarks, summed."""
    return sum(sum(high_watermarks(admin, name, partitions).values()) for name in names)


def newest_run(state_dir: Path) -> dict[str, Any] | None:
    """The newest published run: its start, end and fingerprints (the published file holds
    the newest run only; the interval between publications is the rows' to tell)."""
    try:
        with open_read_only(state_dir / PUBLISHED_FILE) as db:
            row = db.execute(
                "SELECT started_at, finished_at, fingerprints FROM runs "
                "ORDER BY finished_at DESC LIMIT 1"
            ).fetchone()
    except (FileNotFoundError, duckdb.Error):  # not published yet, or being replaced
        return None
    return None if row is None else {"started": row[0], "finished": row[1], "fingerprints": row[2]}


def newest_stages(state_dir: Path) -> str | None:
    """The newest run's summary line from the analysis log (where its time went, the steps
    after its publication included)."""
    log = state_dir / "logs" / "analysis.log"
    if not log.exists():
        return None
    lines = [
        line for line in log.read_text(errors="replace").splitlines() if "published in" in line
    ]
    return lines[-1].split(": ", 1)[-1] if lines else None


HEADER = (
    "minute produced backlog age_s cycle_s interval_s "
    "rss_mb(collect/watch/analyze/dashboard/exporter) stores_mb(samples/fingerprints/published)"
)


def observe(
    state: Path, admin: AdminClient, names: list[str], partitions: int, counted: Path,
    run_pid: int,
) -> dict[str, Any]:  # fmt: skip
    """One row: the records produced, the backlog, the verdict's age, memory and stores."""
    newest = newest_run(state)
    ends = end_offsets(admin, names, partitions)
    now = datetime.now(UTC)
    cycle = (newest["finished"] - newest["started"]).total_seconds() if newest else None
    return {
        "produced": int(counted.read_text() or 0) if counted.exists() else 0,
        "end_offsets": ends,
        "backlog": ends - newest["fingerprints"] if newest else None,
        "age_s": (now - newest["finished"]).total_seconds() if newest else None,
        "cycle_s": cycle,
        "finished": newest["finished"] if newest else None,
        "stages": newest_stages(state),
        "rss_mb": service_rss(run_pid),
        "stores_mb": {
            "samples": size_mb(state / "samples"),
            "fingerprints": size_mb(state / "fingerprints"),
            "published": size_mb(state / PUBLISHED_FILE),
        },
    }


def _short(value: Any) -> str:
    return f"{value:.0f}" if isinstance(value, float) else str(value)


def line(row: dict[str, Any]) -> str:
    rss = "/".join(f"{row['rss_mb'][s]:.0f}" for s in SERVICES)
    stores = "/".join(f"{v:.1f}" for v in row["stores_mb"].values())
    told = " ".join(_short(row[k]) for k in ("backlog", "age_s", "cycle_s", "interval_s"))
    return f"{row['minute']:6.1f} {row['produced']:9d} {told} {rss} {stores}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rate", type=float, default=500.0, help="records a second in all")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--every", type=float, default=30.0)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--workers", type=int, default=0, help="a standalone cluster of N")
    parser.add_argument("--worker-memory", default="2g")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--role", choices=("producer", "relay-a", "relay-t"), help=argparse.SUPPRESS
    )
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--counted", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "producer":
        produce(args.bootstrap, args.pipelines, args.rate, args.counted)
    if args.role in ("relay-a", "relay-t"):
        relay(args.bootstrap, args.role[-1])
    if args.role:
        return 0
    names = [t for _, source, sink in topics(args.pipelines) for t in (source, sink)]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="dgm-bench-soak-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        if args.workers:
            (root / "spark").mkdir()
            cluster = standalone_cluster(root / "spark", args.workers, args.worker_memory)
            args.master = stack.enter_context(cluster)
            print(f"standalone cluster {args.master}, {args.workers} one-core workers", flush=True)
        with one_broker(root / "broker", names, args.partitions) as bootstrap:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            state, config = root / "state", root / "dgm.toml"
            config.write_text(config_text(state, bootstrap, args.pipelines, args.master))
            counted = root / "produced"
            me = [sys.executable, "-m", "bench.soak", "--bootstrap", bootstrap]
            children = [
                subprocess.Popen([*me, "--role", "relay-a"]),
                subprocess.Popen([*me, "--role", "relay-t"]),
                subprocess.Popen([*me, "--role", "producer", "--pipelines", str(args.pipelines),
                    "--rate", str(args.rate), "--counted", str(counted)]),
            ]  # fmt: skip
            logs = (root / "dgm-run.log").open("w")
            ports = ["--port", "8599", "--exporter-port", "9599"]
            run = subprocess.Popen(
                ["dgm", "run", "--config", str(config), *ports],
                stdout=logs,
                stderr=subprocess.STDOUT,
            )
            began = time.monotonic()
            print(HEADER, flush=True)
            try:
                while time.monotonic() - began < args.minutes * 60:
                    time.sleep(args.every)
                    if run.poll() is not None:  # a figure of nothing running is no figure
                        logs.flush()
                        said = (root / "dgm-run.log").read_text()[-3000:]
                        raise SystemExit(f"dgm run exited with {run.returncode}:\n{said}")
                    row = observe(state, admin, names, args.partitions, counted, run.pid)
                    row["minute"] = round((time.monotonic() - began) / 60, 2)
                    # Since the publication before: the audit, the analysis, what follows a
                    # publication (re-read, merge) and the wait; a run's own time leaves
                    # the last three out.
                    ends = [r["finished"] for r in rows if r["finished"] is not None]
                    newer = ends and row["finished"] is not None and row["finished"] > ends[-1]
                    row["interval_s"] = (
                        (row["finished"] - ends[-1]).total_seconds() if newer else None
                    )
                    rows.append(row)
                    print(line(row), flush=True)
            finally:
                run.send_signal(signal.SIGINT)
                try:
                    run.wait(120)
                except subprocess.TimeoutExpired:
                    run.kill()
                for child in children:
                    child.kill()
                    child.wait()
                logs.close()
                if args.out:  # the run's own logs, for what the rows cannot say
                    kept = args.out.with_suffix(".logs")
                    shutil.rmtree(kept, ignore_errors=True)
                    kept.mkdir(parents=True)
                    if (state / "logs").is_dir():
                        shutil.copytree(state / "logs", kept, dirs_exist_ok=True)
                    shutil.copy(root / "dgm-run.log", kept / "dgm-run.log")
    document = {
        "pipelines": args.pipelines,
        "partitions": 2 * args.pipelines * args.partitions,
        "rate": args.rate,
        "master": args.master,
        "workers": args.workers,
        "cores": os.cpu_count(),
        "rows": rows,
    }
    text = json.dumps(document, default=str, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text[-2000:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
