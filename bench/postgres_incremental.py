"""One incremental read of a PostgreSQL sink table: time vs rows in the table and rows added.

Fills a table shaped like the lab's PostgreSQL sink (row_id BIGSERIAL, message_id, source
topic/partition/offset, stored_at) to each `--sizes` count with COPY, then for each
`--added` count appends that many rows and times two things from the previous position:
`reader`, read_incremental with its rows brought to the driver (toArrow: every row really
transferred, not only counted), and `audit`, the real audit step (jdbc_audit.audit_jdbc:
the rows read and written as a committed fingerprint batch with its manifest). A full read
of the table is timed once per size for comparison: the audit path's first read (no
position yet), written as a batch (a full read brought to the driver would need the driver
to hold 10M rows). The first read of the run warms Spark up and is left out.

Uses the server at `--dsn`, or starts a throw-away one from Debian's `postgresql` package
(tests/support/postgres.py).

    python -m bench.postgres_incremental [--sizes 1000000,10000000] [--added 10000,100000]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg import sql

from dgm.config.document import DgmConfig
from dgm.config.external_sinks import POSTGRESQL_DRIVER_PACKAGE, ExternalSink
from dgm.config.pipelines import PipelineConfig
from spark_jobs.audit.external_jdbc import Position, read_incremental
from spark_jobs.audit.jdbc_audit import audit_jdbc
from spark_jobs.audit.store import FingerprintStore
from spark_jobs.session import build_session
from tests.support.postgres import PostgresUnderTest, external, local_server

TABLE = "bench_sink"
COPY_CHUNK = 500_000


@contextlib.contextmanager
def server(dsn: str | None) -> Iterator[PostgresUnderTest]:
    if dsn:
        os.environ["DGM_POSTGRES_DSN"] = dsn
        found = external()
        assert found is not None
        yield found
    else:
        with local_server() as started:
            yield started


def fill(db: psycopg.Connection, rows: int, start: int) -> None:
    """Append `rows` rows by COPY (message ids m-<n>, lineage src/<n % 3>/<n>)."""
    copy = sql.SQL(
        "COPY {} (message_id, source_topic, source_partition, source_offset) FROM STDIN"
    ).format(sql.Identifier(TABLE))
    done = 0
    while done < rows:
        chunk = min(COPY_CHUNK, rows - done)
        text = io.StringIO()
        for n in range(start + done, start + done + chunk):
            text.write(f"m-{n}\tsrc\t{n % 3}\t{n}\n")
        with db.cursor() as cursor, cursor.copy(copy) as writer:
            writer.write(text.getvalue())
        done += chunk
    db.commit()


def timed_read(
    spark: object, pipeline: PipelineConfig, after: Position | None
) -> dict[str, object]:
    began = time.perf_counter()
    read = read_incremental(spark, pipeline, after)  # type: ignore[arg-type]
    rows = read.fingerprints.toArrow().num_rows
    return {"rows": rows, "seconds": round(time.perf_counter() - began, 3), "upto": read.upto}


def timed_audit(spark: object, config: DgmConfig) -> dict[str, object]:
    """One real audit step: the rows added since the stored position, written as a batch."""
    began = time.perf_counter()
    records: dict[str, int] = {}
    with FingerprintStore(config.state_dir).writer_lock():
        audit_jdbc(spark, config, records, lambda line: None)  # type: ignore[arg-type]
    return {"rows": sum(records.values()), "seconds": round(time.perf_counter() - began, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100000", help="table sizes, comma-separated")
    parser.add_argument("--added", default="10000", help="rows added per read, comma-separated")
    parser.add_argument("--dsn", default=None, help="an existing server (libpq URI)")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    added = [int(a) for a in args.added.split(",")]
    spark = build_session(
        master="local[2]", app_name="bench-pg", packages=[POSTGRESQL_DRIVER_PACKAGE]
    )
    print(json.dumps({"machine": platform.platform(), "cpus": os.cpu_count()}), flush=True)
    with server(args.dsn) as pg, psycopg.connect(pg.dsn) as db:
        db.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(TABLE)))
        db.execute(
            sql.SQL(
                "CREATE TABLE {} (row_id BIGSERIAL PRIMARY KEY, message_id TEXT NOT NULL, "
                "source_topic TEXT NOT NULL, source_partition INT NOT NULL, "
                "source_offset BIGINT NOT NULL, stored_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            ).format(sql.Identifier(TABLE))
        )
        db.commit()
        sink = ExternalSink(
            table=TABLE,
            id_column="message_id",
            kind="postgresql",
            source_columns=("source_topic", "source_partition", "source_offset"),
            url=pg.jdbc_url,
            incremental_column="row_id",
            user=pg.user,
            password=pg.password,
        )
        pipeline = PipelineConfig(
            name="bench",
            source_topics=("src",),
            consumer_group="g",
            declared_semantic="exactly-once",
            external_sink=sink,
        )
        total = 0
        fill(db, 1000, 0)
        total = 1000
        timed_read(spark, pipeline, None)  # warm-up
        for size in sizes:
            began = time.perf_counter()
            fill(db, size - total, total)
            total = size
            db.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(TABLE)))
            filled = round(time.perf_counter() - began, 1)
            with tempfile.TemporaryDirectory(prefix="bench-pg-") as state:
                config = DgmConfig(state_dir=Path(state), pipelines=(pipeline,))
                full = timed_audit(spark, config)
                print(json.dumps({"size": size, "fill_s": filled, "full_audit": full}), flush=True)
                for count in added:
                    before = total
                    fill(db, count, total)
                    total += count
                    audited = timed_audit(spark, config)  # the rows above its stored position
                    read = timed_read(spark, pipeline, before)  # the same rows, to the driver
                    line = {"size": total, "added": count, "reader": read, "audit": audited}
                    print(json.dumps(line), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
