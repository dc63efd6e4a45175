"""A published `dgm.duckdb` with realistic rows, built from `dgm/contracts/published.py`'s DDL.

It stands in for a real `dgm analyze` run until the lab can publish one: swap `build` for a
lab run and the dashboard tests keep their meaning. Three pipelines:

- `orders-alo` declares at-least-once and meets it: two ids duplicated by reprocessing
  (allowed at-least-once), nothing lost, tested across faults.
- `payments-eos` declares exactly-once and violates it: three duplicated ids in its sink
  (reprocessing and producer retry), two lost records (one a torn commit) and one sequence
  gap; its source producer wrote two records out of order, its sink holds one; its sink's
  partition 0 was truncated: two records truncated, one of their offsets taken by another
  record (an inconsistent offset).
- `audit-trail` has too few checked records: insufficient evidence.

The ledger topic holds one open and one hanging transaction; the hanging one pins the LSO of
partition 1, so the `ledger-auditor` group's lag from the high watermark exceeds its lag from
the LSO.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from dgm.contracts.published import PUBLISHED_FILE, TABLES
from dgm.contracts.published_views import create_views
from tests.support.published_world.evidence import (
    duplicates,
    late_records,
    log_anomalies,
    lost,
    out_of_order,
)
from tests.support.published_world.samples import (
    faults,
    group_status,
    offsets_and_lag,
    transactions,
)
from tests.support.published_world.shape import WINDOW_S, Row
from tests.support.published_world.verdicts import (
    latency_histogram,
    stages,
    topic_and_partition_windows,
    verdicts,
    windows,
)


@dataclass
class Expected:
    """What the tests may assert about the built file."""

    path: Path
    now: datetime
    duplicated_ids: dict[str, int] = field(default_factory=dict)  # topic -> distinct ids
    extra_copies: dict[str, int] = field(default_factory=dict)
    lost_ids: dict[str, int] = field(default_factory=dict)  # source topic -> lost rows


def runs(now: datetime, finished_ago_s: int) -> list[Row]:
    return [
        {
            "run_id": "run-0001",
            "started_at": finished_ago_s + 12,
            "finished_at": finished_ago_s,
            "last_sample_at": finished_ago_s + 5,
            "records_audited": 1200,
            "fingerprints": 7240,
            "window_s": WINDOW_S,
            "spark_master": "local[*]",
        },
    ]


_TIME_COLUMNS = {c.name for t in TABLES for c in t.columns if c.sql_type == "TIMESTAMPTZ"}


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[Row], now: datetime) -> None:
    spec = next(t for t in TABLES if t.name == table)
    names = ", ".join(f'"{n}"' for n in spec.names)
    marks = ", ".join("?" for _ in spec.names)
    values = []
    for row in rows:
        unknown = set(row) - set(spec.names)
        assert not unknown, f"{table}: no such columns {unknown}"
        values.append(
            [
                now - timedelta(seconds=row[n])
                if n in _TIME_COLUMNS and isinstance(row.get(n), int)
                else row.get(n)
                for n in spec.names
            ]
        )
    if values:
        con.executemany(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', values)


def build(state_dir: Path, *, now: datetime | None = None, finished_ago_s: int = 20) -> Expected:
    """Publish the file into `state_dir` the way `dgm analyze` does (new file, then rename).

    Times in the rows (this package's other modules) are seconds before `now` (default: the
    current time), so the data is fresh unless `finished_ago_s` says the last run is old.
    """
    now = now or datetime.now(UTC).replace(microsecond=0)
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / PUBLISHED_FILE
    temp = state_dir / f".{PUBLISHED_FILE}.tmp"
    temp.unlink(missing_ok=True)
    dups = duplicates()
    judged = verdicts()
    topic_windows, partition_windows = topic_and_partition_windows(dups)
    offsets, lag = offsets_and_lag(now)
    content = {
        "runs": runs(now, finished_ago_s),
        "verdicts": judged,
        "pipeline_windows": windows(judged),
        "latency_histogram": latency_histogram(judged),
        "topic_windows": topic_windows,
        "partition_windows": partition_windows,
        "duplicates": dups,
        "lost": lost(),
        "late_records": late_records(),
        "out_of_order": out_of_order(),
        "partition_offsets": offsets,
        "group_lag": lag,
        "group_status": group_status(lag),
        "transactions": transactions(),
        "faults": faults(),
        "pipeline_stages": stages(),
        "log_anomalies": log_anomalies(),
    }
    with duckdb.connect(str(temp)) as con:
        con.execute("SET TimeZone = 'UTC'")
        for table in TABLES:
            con.execute(table.ddl())
            _insert(con, table.name, content.get(table.name, []), now)  # else empty
        create_views(con)  # as spark_jobs/analyze/publish.py does
    os.replace(temp, path)
    expected = Expected(path, now)
    for d in dups:
        ids = {x["message_id"] for x in dups if x["topic"] == d["topic"]}
        expected.duplicated_ids[d["topic"]] = len(ids)
        expected.extra_copies[d["topic"]] = sum(
            1 for x in dups if x["topic"] == d["topic"] and x["is_extra_copy"]
        )
    expected.lost_ids["payments"] = len(lost())
    return expected


# A copy this young of the file build() made is as fresh as the dashboard tests need (the
# dashboard calls build()'s file STALE only past 3 x 72 s, tests/dashboard/conftest.py).
RECENT_S = 60.0
_recent: dict[str, tuple[float, Expected]] = {}


def recent_copy(state_dir: Path) -> Expected:
    """build(state_dir) with the default times, by copying a file build() made less than
    RECENT_S ago (made once a minute per process: building costs seconds, copying nothing).
    For tests that may change the file or what lies beside it, not the times in it."""
    made = _recent.get("file")
    if made is None or time.monotonic() - made[0] > RECENT_S or not made[1].path.exists():
        template = Path(tempfile.mkdtemp(prefix="dgm-published-world-"))
        made = (time.monotonic(), build(template))
        _recent["file"] = made
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / PUBLISHED_FILE
    temp = state_dir / f".{PUBLISHED_FILE}.tmp"
    shutil.copyfile(made[1].path, temp)
    os.replace(temp, path)  # as build() does: never a half-copied file
    return dataclasses.replace(made[1], path=path)


if __name__ == "__main__":  # python -m tests.support.published_world.publish DIR: a file to look at
    import sys

    print(build(Path(sys.argv[1] if len(sys.argv) > 1 else ".dgm")).path)
