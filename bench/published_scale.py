"""A published dgm.duckdb of the size 10M fingerprints and 1,000 partitions produce, built
directly from the contract (dgm/contracts/published.py) with DuckDB, for the dashboard benchmark.

Spark's analyze + publish of 10M fingerprints takes longer than a benchmark session on the
shared 2-core machine allows (bench/HISTORY.md, "Analyze: time against the DuckDB
reference"), so the tables are computed here with DuckDB from the same generated
fingerprints (bench/generated.py: 10 pipelines, source and sink topics of 50 partitions) and
samples (360 collector cycles, an hour at 10 s): duplicates and lost ids by
tests/support/reference.py's queries, windows and verdicts by plain SQL of the contract's
definitions. Row counts match what analyze publishes for such data; verdict columns are
simplified (achieved from the counts alone).

    python -m bench.published_scale DIR [--rows 10000000] [--pipelines 10] [--partitions 50]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from bench import generated
from dgm.contracts.published import TABLES
from spark_jobs.analyze.group_status import (
    Sample,
    evaluate,
    summarize,
    worst,
)
from tests.support import reference

WINDOW = "time_bucket(INTERVAL 60 SECOND, timestamp)"


def build(out: Path, rows: int, pipelines: int, partitions: int) -> dict[str, int]:
    with tempfile.TemporaryDirectory(prefix="dgm-bench-published-") as tmp:
        world = generated.build(Path(tmp), rows, pipelines, partitions, cycles=360)
        return build_tables(world, out)


def build_tables(world: generated.World, out: Path) -> dict[str, int]:
    """Every contract table of `world` built with DuckDB into `out`/dgm.duckdb (reading the
    fingerprint and sample files: loading counts); rows per table."""
    every = str(world.folder / "*.parquet")
    cutoff = world.now - timedelta(seconds=generated.GRACE_S)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "dgm.duckdb"
    target.unlink(missing_ok=True)
    con = duckdb.connect(str(target))
    con.execute("SET TimeZone = 'UTC'")
    for table in TABLES:
        con.execute(table.ddl())
    con.execute(f"CREATE TEMP VIEW fp AS SELECT * FROM read_parquet('{every}')")
    con.execute(
        "CREATE TEMP TABLE pipes AS SELECT * FROM (VALUES "
        + ", ".join(
            f"('{n}', '{'exactly-once' if i % 2 else 'at-least-once'}')"
            for i, n in enumerate(world.names)
        )
        + ") t(pipeline, declared)"
    )
    copies = reference.duplicate_copies(every)
    con.register("copies", copies)
    causes = [
        reference.duplicate_causes(world.folder / f"s-{n}.parquet", world.folder / f"k-{n}.parquet")
        for n in world.names
    ]
    for n, c in zip(world.names, causes, strict=True):
        con.register(f"causes_{n}", c)
    union = " UNION ALL ".join(
        f"SELECT '{n}' AS pipeline, topic, message_id, cause FROM causes_{n}" for n in world.names
    )
    con.execute(f"CREATE TEMP TABLE causes AS {union}")
    con.execute(
        "INSERT INTO duplicates BY NAME SELECT "
        "c.* EXCLUDE (src_topic, src_partition, src_offset), "
        "k.pipeline, "
        "coalesce(k.cause, 'unknown') AS cause FROM copies c "
        "LEFT JOIN causes k USING (topic, message_id)"
    )
    for n in world.names:
        lost = reference.lost(
            world.folder / f"s-{n}.parquet",
            world.folder / f"k-{n}.parquet",
            world.committed[n],
            cutoff,
        )
        con.register("lost_rows", lost)
        con.execute(
            f"INSERT INTO lost BY NAME SELECT '{n}' AS pipeline, * EXCLUDE (window_at) "
            "FROM lost_rows"
        )
        con.unregister("lost_rows")
    extra = "(SELECT * FROM copies WHERE is_extra_copy)"
    con.execute(
        f"""INSERT INTO topic_windows BY NAME
        WITH w AS (SELECT topic, {WINDOW} AS window_start,
            count(*) FILTER (WHERE committed) AS records,
            count(DISTINCT message_id) FILTER (WHERE committed) AS distinct_ids,
            count(*) FILTER (WHERE committed AND message_id IS NULL) AS unidentified,
            count(*) FILTER (WHERE NOT committed) AS aborted
          FROM fp GROUP BY ALL),
        e AS (SELECT topic, {WINDOW} AS window_start, count(*) AS duplicate_copies
          FROM {extra} GROUP BY ALL)
        SELECT w.*, coalesce(e.duplicate_copies, 0) AS duplicate_copies,
          coalesce(e.duplicate_copies, 0) / nullif(distinct_ids, 0) AS duplicate_rate
        FROM w LEFT JOIN e USING (topic, window_start)"""
    )
    con.register("summary", reference.duplicate_summary(every))
    con.execute("INSERT INTO topic_windows BY NAME SELECT * FROM summary")
    con.execute(
        f"""INSERT INTO partition_windows BY NAME
        WITH w AS (SELECT topic, "partition", {WINDOW} AS window_start,
            count(*) FILTER (WHERE committed) AS records,
            count(*) FILTER (WHERE NOT committed) AS aborted FROM fp GROUP BY ALL),
        e AS (SELECT topic, "partition", {WINDOW} AS window_start, count(*) AS duplicate_copies
          FROM {extra} GROUP BY ALL)
        SELECT w.*, coalesce(e.duplicate_copies, 0) AS duplicate_copies
        FROM w LEFT JOIN e USING (topic, "partition", window_start)"""
    )
    con.execute(
        f"""INSERT INTO pipeline_windows BY NAME
        WITH checked AS (SELECT substr(topic, 3) AS pipeline, {WINDOW} AS window_start,
            count(*) AS records_checked FROM fp
          WHERE topic LIKE 's-%' AND committed AND message_id IS NOT NULL
          GROUP BY ALL),
        l AS (SELECT pipeline, {WINDOW} AS window_start, sum(missing) AS lost
          FROM lost GROUP BY ALL),
        d AS (SELECT pipeline, {WINDOW} AS window_start, count(*) AS duplicate_copies
          FROM duplicates WHERE is_extra_copy AND pipeline IS NOT NULL GROUP BY ALL)
        SELECT c.*, coalesce(d.duplicate_copies, 0) AS duplicate_copies,
          coalesce(d.duplicate_copies, 0) / c.records_checked AS duplicate_rate,
          coalesce(l.lost, 0) AS lost, coalesce(l.lost, 0) / c.records_checked AS loss_rate,
          0 AS aborted_reads, 0 AS beyond_retention, 0 AS faults_observed,
          CASE WHEN coalesce(l.lost, 0) > 0 AND coalesce(d.duplicate_copies, 0) > 0
               THEN 'no guarantee' WHEN coalesce(l.lost, 0) > 0 THEN 'at-most-once'
               WHEN coalesce(d.duplicate_copies, 0) > 0 THEN 'at-least-once'
               ELSE 'exactly-once' END AS achieved
        FROM checked c LEFT JOIN l USING (pipeline, window_start)
        LEFT JOIN d USING (pipeline, window_start)"""
    )
    con.execute(
        """INSERT INTO verdicts BY NAME
        SELECT pipeline, declared, 'no guarantee' AS achieved, false AS meets_declared,
          sum(records_checked) AS records_checked, sum(records_checked) AS sink_records,
          sum(records_checked) AS distinct_ids, sum(duplicate_copies) AS duplicate_copies,
          sum(duplicate_copies) / sum(records_checked) AS duplicate_rate,
          0 AS upstream_duplicates, sum(lost) AS lost,
          sum(lost) / sum(records_checked) AS loss_rate, 0 AS aborted_reads,
          0 AS unidentified, 0 AS beyond_retention, 2 AS faults_observed,
          'faults observed' AS evidence,
          min(window_start) AS first_record_at, max(window_start) AS last_record_at,
          ['s-' || pipeline] AS source_topics, ['k-' || pipeline] AS sink,
          'g-' || pipeline AS consumer_group
        FROM pipeline_windows JOIN pipes USING (pipeline) GROUP BY pipeline, declared"""
    )
    samples = world.state / "samples"
    con.execute(
        "INSERT INTO partition_offsets BY NAME SELECT * EXCLUDE (cluster_id, leader, "
        f"leader_epoch, topic_id, lso_since) FROM read_parquet('{samples}/offsets/*.parquet')"
    )
    con.execute(
        "INSERT INTO group_lag BY NAME SELECT * EXCLUDE (cluster_id, member_id, "
        f"high_watermark, lso) FROM read_parquet('{samples}/group_offsets/*.parquet')"
    )
    insert_group_status(con, samples / "group_offsets")
    con.execute(
        'INSERT INTO transactions BY NAME SELECT sampled_at, topic, "partition", '
        "producer_id, producer_epoch, transactional_id, txn_start_offset, idle_ms AS age_ms, "
        f"hanging, hanging_reason FROM read_parquet('{samples}/producers/*.parquet')"
    )
    con.execute(
        "INSERT INTO faults BY NAME SELECT sampled_at AS at, event, group_id, "
        "substr(group_id, 3) AS pipeline, '' AS detail "
        f"FROM read_parquet('{samples}/events/*.parquet')"
    )
    now = datetime.now(UTC)
    con.execute(
        "INSERT INTO runs VALUES ('bench', ?, ?, ?, ?, ?, 60, 'duckdb (bench)')",
        [now, now, world.now, world.rows, world.rows],
    )
    con.execute("CHECKPOINT")
    counts = {
        t.name: con.execute(f'SELECT count(*) FROM "{t.name}"').fetchone()[0]  # type: ignore[index]
        for t in TABLES
    }
    con.close()
    return counts


def insert_group_status(con: duckdb.DuckDBPyConnection, folder: Path, size: int = 10) -> None:
    """group_status by the rules' pure evaluation (spark_jobs.analyze.group_status) over the
    group_offsets samples: the same rules, the main columns, partition rows and group rows."""
    found = con.execute(
        'SELECT group_id, topic, "partition", sampled_at, committed_offset, lso, '
        "high_watermark, member_id IS NOT NULL "
        f"FROM read_parquet('{folder}/*.parquet') WHERE lag_from_lso IS NOT NULL"
    ).fetchall()
    by_key: dict[tuple[str, str, int], list[tuple[Sample, Sample]]] = defaultdict(list)
    for group, topic, partition, at, committed, lso, hw, owned in found:
        by_key[(group, topic, partition)].append(
            (Sample(at, committed, lso, owned), Sample(at, committed, hw, owned))
        )
    rows: list[tuple[object, ...]] = []
    statuses: dict[str, list[str]] = defaultdict(list)
    for (group, topic, partition), pairs in by_key.items():
        lso, hw = summarize([p[0] for p in pairs], size), summarize([p[1] for p in pairs], size)
        status, reason = evaluate(lso)
        window = sorted(p[0].at for p in pairs)[-size:]
        statuses[group].append(status)
        rows.append((group, topic, partition, status, status.severity, reason, evaluate(hw)[0],
                     lso.samples, window[0], window[-1], lso.committed_start, lso.committed_end,
                     lso.lag_start, lso.lag_end, hw.lag_end))  # fmt: skip
    for group, found_statuses in statuses.items():
        status = worst(found_statuses)
        rows.append((group, None, None, status, status.severity, "worst of its partitions",
                     None, None, None, None, None, None, None, None, None))  # fmt: skip
    columns = (
        "group_id, topic, partition, status, severity, reason, status_from_hw, samples, "
        "window_start, window_end, committed_start, committed_end, lso_lag_start, "
        "lso_lag_end, hw_lag_end"
    )
    names = ", ".join(f'"{c}"' for c in columns.split(", "))
    marks = ", ".join("?" for _ in columns.split(", "))
    con.executemany(f"INSERT INTO group_status ({names}) VALUES ({marks})", rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--pipelines", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=50)
    args = parser.parse_args()
    began = time.perf_counter()
    counts = build(args.out, args.rows, args.pipelines, args.partitions)
    print(f"built in {time.perf_counter() - began:.1f}s: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
