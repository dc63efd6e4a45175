"""Server-side render time of every dashboard page over a published file of analysis scale.

The published dgm.duckdb is one `bench/published_scale.py DIR` builds (e.g. 10M
fingerprints over 100 pipelines: `--pipelines 100 --partitions 5`, 1,000 partitions) or one
`bench/analyze_scale.py --keep DIR` leaves. Every page is shown over a custom time range
spanning the whole publication (its data is months old, so a relative range would be empty),
the topic page with the story of its first duplicated id. Each page runs in
`streamlit.testing.v1.AppTest` (as tests/dashboard run them):

- cold: `st.cache_data` cleared, then the page run (every query reads the file);
- warm: the same page run again (queries answered from the cache).

Median of --reps of each; the target is under 1 s per page. Then every query of
dashboard/queries.py once on its own, uncached, to name the slow one of a slow page.

    python -m bench.dashboard_render DIR [--reps 5] [--topic k-p00]

Current figures: bench/README.md; their history: bench/HISTORY.md, "Dashboard: render time
per page".
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
    at.query_params.update(params)
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


def query_timings(topic: str, group: str, span: dict[str, str], dup: str) -> dict[str, float]:
    from dashboard import pipeline_queries, queries, story_queries
    from dashboard.timerange import TimeRange, _instant

    start, end = _instant(span["from"]), _instant(span["to"])
    assert start is not None and end is not None
    within = TimeRange("custom", start, end)

    calls: dict[str, Callable[[], Any]] = {
        "check": queries.check,
        "runs": queries.runs,
        "verdicts": queries.verdicts,
        "pipeline_windows": lambda: queries.pipeline_windows(within),
        "overview table": pipeline_queries.overview,
        "verdict_segments": lambda: pipeline_queries.verdict_segments(within),
        "duplicates_by_cause": lambda: queries.duplicates_by_cause(topic, within),
        "story": lambda: story_queries.story(topic, dup),
        "topics": queries.topics,
        "topic_windows": lambda: queries.topic_windows(topic, within),
        "topic_totals": queries.topic_totals,
        "loss_windows": lambda: queries.loss_windows(topic, within),
        "partition_windows": lambda: queries.partition_windows(topic, within),
        "duplicates": lambda: queries.duplicates(topic, within),
        "lost": lambda: queries.lost(topic, within),
        "latest_offsets": queries.latest_offsets,
        "partition_offsets": lambda: queries.partition_offsets(topic, within),
        "group_ids": queries.group_ids,
        "group_lag": lambda: queries.group_lag(group, within),
        "transactions": queries.transactions,
        "faults": lambda: queries.faults(within),
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
    parser.add_argument("--topic", default="k-p00")
    parser.add_argument("--group", default="g-p00")
    args = parser.parse_args()
    from dgm.contracts.published import published_path

    state_dir = args.state_dir.resolve()
    published = published_path(state_dir)
    point_at(state_dir)
    from dgm.contracts.published import open_read_only

    with open_read_only(published) as con:
        counts = {
            t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]  # type: ignore[index]
            for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
        }
        low, high = con.execute(
            "SELECT least((SELECT min(window_start) FROM pipeline_windows), "
            "(SELECT min(sampled_at) FROM partition_offsets)), "
            "greatest((SELECT max(window_start) FROM pipeline_windows), "
            "(SELECT max(sampled_at) FROM partition_offsets))"
        ).fetchone()  # type: ignore[misc]
        (dup,) = con.execute(
            "SELECT min(message_id) FROM duplicates WHERE topic = ?", [args.topic]
        ).fetchone()  # type: ignore[misc]
    size = published.stat().st_size
    print(f"{published}: {size / 1e6:.1f} MB; rows: {counts}", flush=True)
    from datetime import timedelta

    from dashboard.timerange import stamp

    span = {"range": "custom", "from": stamp(low), "to": stamp(high + timedelta(minutes=2))}
    print(f"time range: {span}; story of {dup!r} in {args.topic}", flush=True)
    params = {page: dict(span) for page in PAGES}
    params["topic"].update(topic=args.topic, id=str(dup))
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
    timings = query_timings(args.topic, args.group, span, str(dup))
    for name in [k for k in timings if not k.endswith(" rows")]:
        print(f"  {name}: {timings[name]:.3f}s, {int(timings[name + ' rows'])} rows")
    os.system("uptime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
