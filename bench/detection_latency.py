"""How long `dgm demo` takes to start, and how long a duplicate takes to reach the dashboard.

Starts `dgm demo` in a fresh state directory and measures:

- start-up: seconds until the dashboard answers over HTTP, and until the first analysis is
  published (dgm.duckdb exists with a `runs` row). Point the caches at an empty folder for a
  cold start: `XDG_CACHE_HOME=$(mktemp -d) python bench/detection_latency.py --startup-only`.
- detection latency: for every extra copy of an id in a demo pipeline's sink, the time from
  the copy's Kafka record timestamp (when the duplicate was written to the sink; a
  transactional one commits within the same step) to the moment this script, polling every
  second, first reads it from the published `duplicates` table (what a dashboard reader
  sees). Only copies written after the first publication count, so the backlog audited by
  the first run does not flatter or spoil it. (`runs.finished_at` is stamped before the
  publish stage, so latencies against it would hide the publishing time.)

`--attach STATE_DIR` measures the latency on a demo that is already running (nothing started
or stopped).

Prints one JSON document; stops the demo with SIGINT at the end. Not a timed test.

    python bench/detection_latency.py [--duplicates 20] [--timeout 1800] [--brokers 1]
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

from dgm.ports import free_ports
from dgm.published import open_read_only


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def publication(database: Path) -> tuple[datetime | None, list[tuple[Any, ...]]]:
    """(finished_at of the published run, [(pipeline, topic, message_id, copy, timestamp)])."""
    if not database.exists():
        return None, []
    try:
        with open_read_only(database) as db:
            finished = db.execute("SELECT max(finished_at) FROM runs").fetchone()
            rows = db.execute(
                "SELECT pipeline, topic, message_id, copy_number, timestamp FROM duplicates "
                "WHERE is_extra_copy AND pipeline IS NOT NULL"
            ).fetchall()
    except duckdb.Error:
        return None, []
    return (finished[0] if finished else None), rows


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
    first_seen: dict[tuple[Any, ...], float] = {}
    latencies: list[float] = []
    baseline: datetime | None = None
    try:
        while time.monotonic() - began < args.timeout:
            if demo.poll() is not None:
                raise SystemExit(f"dgm demo exited {demo.returncode}; see {log}")
            now = time.monotonic() - began
            if "dashboard_s" not in result and answers(url):
                result["dashboard_s"] = round(now, 1)
            finished, rows = publication(database)
            if finished is not None and "first_analysis_s" not in result:
                result["first_analysis_s"] = round(now, 1)
                baseline = finished
                if args.startup_only and "dashboard_s" in result:
                    break
            if finished is not None and baseline is not None:
                for pipeline, topic, message_id, copy, stamp in rows:
                    key = (pipeline, topic, message_id, copy)
                    if key in first_seen or stamp is None or stamp <= baseline:
                        continue
                    first_seen[key] = time.time()
                    latencies.append(first_seen[key] - stamp.astimezone(UTC).timestamp())
            if len(latencies) >= args.duplicates and not args.startup_only:
                break
            time.sleep(1.0)
    finally:
        demo.send_signal(signal.SIGINT)
        result["demo_exit"] = demo.wait(300)
    result.update(summary(latencies))
    result["elapsed_s"] = round(time.monotonic() - began, 1)
    print(json.dumps(result, indent=2))
    return 0


def summary(latencies: list[float]) -> dict[str, Any]:
    if not latencies:
        return {}
    return {
        "duplicates": len(latencies),
        "latency_s": {
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
    seen: set[tuple[Any, ...]] = set()
    latencies: list[float] = []
    while len(latencies) < wanted and time.monotonic() - began < timeout:
        _, rows = publication(database)
        now = time.time()
        for pipeline, topic, message_id, copy, stamp in rows:
            key = (pipeline, topic, message_id, copy)
            if key in seen or stamp is None or baseline is None or stamp <= baseline:
                continue
            seen.add(key)
            latencies.append(now - stamp.astimezone(UTC).timestamp())
        time.sleep(1.0)
    return {"attached_to": str(state_dir), "load_average": os.getloadavg(), **summary(latencies)}


if __name__ == "__main__":
    sys.exit(main())
