"""Scrape time of `dgm exporter` over a large publication (bench/published_scale.py).

Starts the exporter's HTTP server in-process on a free loopback port over DIR (a state
directory holding dgm.duckdb), then GETs /metrics --scrapes times over HTTP, as Prometheus
would: each scrape opens the published file read-only, runs the exporter's queries and
renders the text format. Also times the JSON API's endpoints. Prints medians, min and max.

    python -m bench.published_scale /tmp/dgm-pub-10m
    python -m bench.exporter_scrape /tmp/dgm-pub-10m [--scrapes 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

from exporter.server import ExporterServer

Timing = tuple[float, float]  # (wall, CPU) seconds


def timed_get(url: str) -> tuple[Timing, bytes]:
    """Wall time, and the CPU time of this process (server threads and client) meanwhile:
    on a machine shared with other work the CPU time is what the scrape itself costs."""
    began, cpu = time.perf_counter(), time.process_time()
    with urllib.request.urlopen(url, timeout=60) as answer:
        body = answer.read()
        assert answer.status == 200, url
    return (time.perf_counter() - began, time.process_time() - cpu), body


def summary(name: str, timings: list[Timing]) -> str:
    def stats(values: list[float]) -> str:
        ms = sorted(v * 1000 for v in values)
        return f"median {statistics.median(ms):.1f} ms (min {ms[0]:.1f}, max {ms[-1]:.1f})"

    wall, cpu = stats([t[0] for t in timings]), stats([t[1] for t in timings])
    return f"{name}: wall {wall}; CPU {cpu}; {len(timings)} runs"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("state_dir", type=Path)
    parser.add_argument("--scrapes", type=int, default=20)
    args = parser.parse_args()
    if not (args.state_dir / "dgm.duckdb").exists():
        parser.error(f"no dgm.duckdb in {args.state_dir}: run bench/published_scale.py first")
    server = ExporterServer(("127.0.0.1", 0), args.state_dir)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        first, body = timed_get(f"{base}/metrics")
        lines = [line for line in body.decode().splitlines() if not line.startswith("#")]
        print(f"first scrape: wall {first[0] * 1000:.1f} ms, CPU {first[1] * 1000:.1f} ms")
        print(f"{len(lines)} series, {len(body)} bytes")
        scrapes = [timed_get(f"{base}/metrics")[0] for _ in range(args.scrapes)]
        print(summary("/metrics", scrapes))
        topic = "k-p00"
        for path in (
            "/api/v1/verdicts",
            "/api/v1/pipelines/p00?limit=60",
            f"/api/v1/topics/{topic}/duplicates?limit=100",
            f"/api/v1/topics/{topic}/duplicates?limit=10000",
        ):
            print(summary(path, [timed_get(base + path)[0] for _ in range(5)]))
    finally:
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
