"""How long publishing takes: writing every table of a 10M-fingerprint analysis into a new
DuckDB file and renaming it over the published one (spark_jobs/analyze/publish.py), the part
of a cycle that readers wait on.

Reads the tables of a published dgm.duckdb (bench/published_scale.py builds one of the size
10M fingerprints and 1,000 partitions give) into Arrow, then publishes them `--reps` times
into a temp state directory, as the analysis does once its tables are computed. Prints each
repetition, the rows per table and the median.

    python -m bench.published_scale /tmp/dgm-pub-10m
    python -m bench.publish_time /tmp/dgm-pub-10m/dgm.duckdb [--reps 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from dgm.contracts.published import TABLES, open_read_only
from spark_jobs.analyze.publish import publish


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("published", type=Path)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with open_read_only(args.published) as connection:
        tables = {
            t.name: connection.execute(f'SELECT * FROM "{t.name}"').to_arrow_table() for t in TABLES
        }
    rows = {name: table.num_rows for name, table in tables.items()}
    print(f"rows: {rows} ({sum(rows.values()):,} in all)")
    times = []
    with tempfile.TemporaryDirectory(prefix="dgm-bench-publish-") as state:
        for rep in range(args.reps):
            began = time.perf_counter()
            published = publish(tables, Path(state))
            times.append(time.perf_counter() - began)
            size = published.stat().st_size / 1e6
            print(f"rep {rep}: {times[-1]:.2f}s ({size:.1f} MB)", flush=True)
    print(f"median {statistics.median(times):.2f}s of {len(times)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
