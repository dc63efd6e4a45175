"""Server-side render time of every dashboard page over a published file of analysis scale.

The published dgm.duckdb is the one `bench/analyze_scale.py --keep DIR` leaves: the real
analyze + publish of its largest size (10M fingerprints, 10 pipelines, 1,000 partitions by
default). Each page runs in `streamlit.testing.v1.AppTest` (as tests/dashboard run them):

- cold: `st.cache_data` cleared, then the page run (every query reads the file);
- warm: the same page run again (queries answered from the cache).

Median of --reps of each; the target is under 1 s per page. Then every query of
dashboard/queries.py once on its own, uncached, to name the slow one of a slow page.

    python bench/dashboard_render.py DIR [--reps 5] [--topic s-p00]

Figures are recorded in bench/README.md, "Dashboard: render time per page".
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

APP = REPO / "dashboard" / "app.py"
PAGES = ("overview", "topic", "transactions", "groups", "alerts")
TARGET_S = 1.0


def point_at(state_dir: Path) -> None:
    config = state_dir / "dgm.toml"
    config.write_text(
        'state_dir = "."\n[analysis]\ninterval_s = 60\n[collectors]\ninterval_s = 10\n'
    )
    os.environ["DGM_CONFIG"] = str(config)
    os.environ["DGM_STATE_DIR"] = str(state_dir)
    os.environ["DGM_DASHBOARD_REFRESH_S"] = "0"


def render(page: str, params: dict[str, str], cold: bool) -> tuple[float, float, list[str]]:
    """(seconds of the page's first run, of a second run, errors) in one AppTest."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=300)
    if page != "overview":
        at.run()  # the app's first run renders the default page; switch from it
        at.query_params.update(params)
        at.switch_page(f"views/{page}.py")
    if cold:
        st.cache_data.clear()
    began = time.perf_counter()
    at.run()
    first = time.perf_counter() - began
    began = time.perf_counter()
    at.run()
    second = time.perf_counter() - began
    errors = [e.message for e in at.exception] + [
        str(e.value) for e in at.error if "STALE" not in str(e.value)
    ]
    return first, second, errors


def query_timings(topic: str, group: str) -> dict[str, float]:
    from dashboard import queries

    calls: dict[str, Callable[[], Any]] = {
        "check": queries.check,
        "runs": queries.runs,
        "verdicts": queries.verdicts,
        "pipeline_windows": queries.pipeline_windows,
        "topics": queries.topics,
        "topic_windows": lambda: queries.topic_windows(topic),
        "topic_totals": queries.topic_totals,
        "loss_windows": lambda: queries.loss_windows(topic),
        "partition_windows": lambda: queries.partition_windows(topic),
        "duplicates": lambda: queries.duplicates(topic),
        "lost": lambda: queries.lost(topic),
        "latest_offsets": queries.latest_offsets,
        "partition_offsets": lambda: queries.partition_offsets(topic),
        "group_ids": queries.group_ids,
        "group_lag": lambda: queries.group_lag(group),
        "transactions": queries.transactions,
        "faults": queries.faults,
        "cluster_summary": queries.cluster_summary,
    }
    import streamlit as st

    timings = {}
    for name, call in calls.items():
        st.cache_data.clear()
        began = time.perf_counter()
        result = call()
        timings[name] = time.perf_counter() - began
        rows = len(result) if hasattr(result, "__len__") else 0
        timings[name + " rows"] = rows
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("state_dir", type=Path, help="holds the published dgm.duckdb")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--topic", default="s-p00")
    parser.add_argument("--group", default="g-p00")
    args = parser.parse_args()
    from dgm.published import published_path

    state_dir = args.state_dir.resolve()
    published = published_path(state_dir)
    point_at(state_dir)
    from dgm.published import open_read_only

    with open_read_only(published) as con:
        counts = {
            t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]  # type: ignore[index]
            for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
        }
    size = published.stat().st_size
    print(f"{published}: {size / 1e6:.1f} MB; rows: {counts}", flush=True)
    params = {"topic": {"topic": args.topic}}
    results: dict[str, dict[str, list[float]]] = {p: {"cold": [], "warm": []} for p in PAGES}
    for rep in range(args.reps):
        for page in PAGES:
            cold, warm_first, errors = render(page, params.get(page, {}), cold=True)
            _, warm, _ = render(page, params.get(page, {}), cold=False)
            results[page]["cold"].append(cold)
            results[page]["warm"].append(min(warm, warm_first))
            note = f" errors: {errors}" if errors else ""
            print(f"  rep {rep} {page}: cold {cold:.2f}s, warm {warm:.2f}s{note}", flush=True)
    print(f"\nmedians of {args.reps} (target {TARGET_S:.0f} s):")
    for page in PAGES:
        cold = statistics.median(results[page]["cold"])
        warm = statistics.median(results[page]["warm"])
        miss = " MISSES" if max(cold, warm) > TARGET_S else ""
        print(f"  {page}: cold {cold:.2f}s, warm {warm:.2f}s{miss}")
    print("\nqueries alone, uncached (s, rows):")
    timings = query_timings(args.topic, args.group)
    for name in [k for k in timings if not k.endswith(" rows")]:
        print(f"  {name}: {timings[name]:.3f}s, {int(timings[name + ' rows'])} rows")
    os.system("uptime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
