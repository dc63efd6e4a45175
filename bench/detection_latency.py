"""How long `dgm demo` takes to start, and how long a duplicate takes to reach the dashboard.

Starts `dgm demo` in a fresh state directory and measures:

- start-up: seconds until the dashboard answers over HTTP, and until the first analysis is
  published (dgm.duckdb exists with a `runs` row). Point the caches at an empty folder for a
  cold start: `XDG_CACHE_HOME=$(mktemp -d) python -m bench.detection_latency --startup-only`.
- detection latency: for every extra copy of an id in a demo pipeline's sink that the
  analysis publishes (its `duplicates` table), the time from the copy's Kafka record
  timestamp (when the duplicate was written to the sink; a transactional one commits within
  the same step) to the moment this script, polling every second, first reads it:
  `dashboard_latency_s` from whichever published file has it first (the watch's
  seen duplicates in watch.parquet, or the analysis's `duplicates`: the dashboard shows
  both), `analysis_latency_s` from the analysis's alone. `watch_missed` counts the copies
  the analysis published that the watch never did; `watch_alone_after_120s` the watch's
  copies no analysis had published two minutes later (both 0 when they agree). Only copies
  written after the first publication count, so the backlog audited by the first run does
  not flatter or spoil it. (`runs.finished_at` is stamped before the publish stage, so
  latencies against it would hide the publishing time.)

`--attach STATE_DIR` measures the latency on a demo that is already running (nothing started
or stopped).

Prints one JSON document; stops the demo with SIGINT at the end. Not a timed test.

    python -m bench.detection_latency [--duplicates 20] [--timeout 1800] [--brokers 1]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from dgm.contracts.published import open_read_only
from dgm.contracts.watched import read_watch
from dgm.util.ports import free_ports


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


Copy = tuple[Any, ...]  # (pipeline, topic, partition, offset) of an extra copy


def publication(database: Path) -> tuple[datetime | None, dict[Copy, datetime]]:
    """(finished_at of the published run, {extra copy: its timestamp}) of the analysis."""
    if not database.exists():
        return None, {}
    try:
        with open_read_only(database) as db:
            finished = db.execute("SELECT max(finished_at) FROM runs").fetchone()
            rows = db.execute(
                'SELECT pipeline, topic, partition, "offset", timestamp FROM duplicates '
                "WHERE is_extra_copy AND pipeline IS NOT NULL"
            ).fetchall()
    except duckdb.Error:
        return None, {}
    return (finished[0] if finished else None), {tuple(r[:4]): r[4] for r in rows}


def watched(state_dir: Path) -> dict[Copy, datetime]:
    """{extra copy: its timestamp} the watch has published (watch.parquet)."""
    found = read_watch(state_dir)
    rows = [] if found is None else found[0].to_pylist()
    return {(r["pipeline"], r["topic"], r["partition"], r["offset"]): r["timestamp"] for r in rows}


class Latencies:
    """When each extra copy written after `baseline` was first read from the watch's file
    and from the analysis's, against its Kafka timestamp."""

    def __init__(self, baseline: datetime) -> None:
        self.baseline = baseline
        self.stamp: dict[Copy, float] = {}
        self.by_watch: dict[Copy, float] = {}
        self.by_analysis: dict[Copy, float] = {}

    def note(self, found: dict[Copy, datetime], into: dict[Copy, float]) -> None:
        now = time.time()
        for copy, stamp in found.items():
            if copy in into or stamp is None or stamp <= self.baseline:
                continue
            into[copy] = now
            self.stamp[copy] = stamp.astimezone(UTC).timestamp()

    def poll(self, state_dir: Path) -> None:
        self.note(watched(state_dir), self.by_watch)
        self.note(publication(state_dir / "dgm.duckdb")[1], self.by_analysis)

    def summary(self) -> dict[str, Any]:
        """Latencies on the dashboard (the first of the two files) and of the analysis alone,
        over the copies the analysis published; what the watch missed or told alone."""
        copies = sorted(self.by_analysis)
        first = [
            min(self.by_watch.get(c, self.by_analysis[c]), self.by_analysis[c]) for c in copies
        ]
        old = time.time() - 120  # the analysis has had two cycles to publish these
        alone = [c for c, t in self.by_watch.items() if c not in self.by_analysis and t < old]
        return {
            **summary("dashboard", [t - self.stamp[c] for c, t in zip(copies, first, strict=True)]),
            **summary("analysis", [self.by_analysis[c] - self.stamp[c] for c in copies]),
            "watch_told": sum(c in self.by_watch for c in copies),
            "watch_missed": sum(c not in self.by_watch for c in copies),
            "watch_alone_after_120s": len(alone),
        }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duplicates", type=int, default=20, help="latencies to collect")
    parser.add_argument("--timeout", type=float, default=1800.0, help="give up after (s)")
    parser.add_argument("--brokers", type=int, choices=(1, 3), default=1)
    parser.add_argument("--rate", type=float, default=5.0)
    parser.add_argument("--startup-only", action="store_true", help="stop after 1st analysis")
    parser.add_argument("--attach", type=Path, help="state dir of a running demo")
    args = parser.parse_args()
    if args.attach is not None:
        print(json.dumps(attach(args.attach.absolute(), args.duplicates, args.timeout), indent=2))
        return 0

    state_dir = Path(tempfile.mkdtemp(prefix="dgm-bench-demo-")) / "demo"
    (port,) = free_ports(1)
    url = f"http://127.0.0.1:{port}"
    database = state_dir / "dgm.duckdb"
    log = state_dir.parent / "demo.out"
    command = [sys.executable, "-m", "shell.cli", "demo", "--state-dir", str(state_dir)]
    command += ["--port", str(port), "--brokers", str(args.brokers), "--rate", str(args.rate)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DGM_")}
    began = time.monotonic()
    with log.open("w") as out:
        demo = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    result: dict[str, Any] = {
        "command": " ".join(command),
        "cache": os.environ.get("XDG_CACHE_HOME") or os.environ.get("DGM_CACHE_DIR") or "~/.cache",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "load_average_at_start": os.getloadavg(),
    }
    latencies: Latencies | None = None
    try:
        while time.monotonic() - began < args.timeout:
            if demo.poll() is not None:
                raise SystemExit(f"dgm demo exited {demo.returncode}; see {log}")
            now = time.monotonic() - began
            if "dashboard_s" not in result and answers(url):
                result["dashboard_s"] = round(now, 1)
            if latencies is None:
                finished, _ = publication(database)
                if finished is not None:
                    result["first_analysis_s"] = round(now, 1)
                    latencies = Latencies(finished)
                    if args.startup_only and "dashboard_s" in result:
                        break
            if latencies is not None:
                latencies.poll(state_dir)
                if len(latencies.by_analysis) >= args.duplicates and not args.startup_only:
                    break
            time.sleep(1.0)
    finally:
        demo.send_signal(signal.SIGINT)
        result["demo_exit"] = demo.wait(300)
    if latencies is not None:
        result.update(latencies.summary())
    result["elapsed_s"] = round(time.monotonic() - began, 1)
    print(json.dumps(result, indent=2))
    return 0


def summary(name: str, latencies: list[float]) -> dict[str, Any]:
    if not latencies:
        return {}
    return {
        f"{name}_latency_s": {
            "duplicates": len(latencies),
            "p50": round(statistics.median(latencies), 1),
            "p95": round(percentile(latencies, 0.95), 1),
            "min": round(min(latencies), 1),
            "max": round(max(latencies), 1),
        },
    }


def attach(state_dir: Path, wanted: int, timeout: float) -> dict[str, Any]:
    """Latencies of sink duplicates written after the first publication seen from now."""
    database = state_dir / "dgm.duckdb"
    began = time.monotonic()
    baseline, _ = publication(database)
    while baseline is None and time.monotonic() - began < timeout:
        time.sleep(1.0)
        baseline, _ = publication(database)
    if baseline is None:
        return {"attached_to": str(state_dir), "error": "nothing published"}
    latencies = Latencies(baseline)
    while len(latencies.by_analysis) < wanted and time.monotonic() - began < timeout:
        latencies.poll(state_dir)
        time.sleep(1.0)
    return {"attached_to": str(state_dir), "load_average": os.getloadavg(), **latencies.summary()}


if __name__ == "__main__":
    sys.exit(main())
