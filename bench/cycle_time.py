"""An analysis cycle's time against the fingerprints retained: 10k new records per cycle on top
of 1M, 3M and 10M (issue 13: cost in proportion to the new records, <= 10 s at 10M).

bench/generated.py's pipelines (10 pipelines of 50 partitions per topic, the differential
tests' failure model) are generated, ordered by time and split: the oldest `size` rows are
the retained fingerprints, then each cycle adds the next `--new` rows and moves `now` to
their newest timestamp (so the grace cutoff passes over new source records too). The kept
fingerprints are held as audit.incremental_load holds them (one persisted piece per batch,
their union coalesced), and a cycle is what `dgm analyze` does after its audit: count the
kept rows, analyze (the engine and the samples' tables) and publish to DuckDB. The first
cycle has no state, so it is the rebuild; the audit of the new records from Kafka is not
included (it does not depend on what is retained: bench/HISTORY.md, "The incremental
engine").

With `--audit`, each cycle's new records are instead produced to a topic of the project's
embedded broker and audited from it by the real audit (the live topic a pipeline's source),
so a cycle is what `dgm analyze` does from audit to publication; the retained fingerprints
are the same.

    DGM_SPARK_DRIVER_MEMORY=10g python -m bench.cycle_time [--sizes 1000000,3000000,10000000]
        [--new 10000] [--cycles 6] [--audit]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import audit_throughput, generated


def sampled_before(state: Path, at: datetime) -> None:
    """Every sample taken at `at`: the group's commits (95% of each partition of everything
    generated) are then known at every cycle's `now`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in (state / "samples").rglob("*.parquet"):
        table = pq.read_table(path)
        column = table.schema.get_field_index("sampled_at")
        stamps = pa.array([at] * table.num_rows, table.schema.field(column).type)
        pq.write_table(table.set_column(column, table.schema.field(column), stamps), path)


def one_size(
    spark: Any, root: Path, size: int, new: int, cycles: int, live: tuple[str, str] | None
) -> dict[str, Any]:
    """Cycles over `size` retained fingerprints; with `live` (bootstrap, topic), each cycle's
    new records are produced to that topic and audited from it (the real audit)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from spark_jobs.analysis_input import Fingerprints
    from spark_jobs.analyze.analysis import analyze
    from spark_jobs.analyze.engine import Engine
    from spark_jobs.analyze.publish import publish
    from spark_jobs.analyze.samples import SampleReader
    from spark_jobs.audit.incremental_load import KEPT, KeptFingerprints
    from spark_jobs.schemas import FINGERPRINT

    world = generated.build(root, int((size + new * cycles) * 1.05), 10, 50)
    config = generated.config(world.names)
    whole = pq.read_table(world.folder)
    whole = whole.take(pc.sort_indices(whole, [("timestamp", "ascending")]))
    pieces = root / "pieces"
    pieces.mkdir()
    pq.write_table(whole.slice(0, size), pieces / "retained.parquet")
    for cycle in range(cycles):
        pq.write_table(whole.slice(size + cycle * new, new), pieces / f"new-{cycle}.parquet")
    stamps = [whole["timestamp"][size + (c + 1) * new - 1].as_py() for c in range(cycles)]
    del whole
    sampled_before(world.state, stamps[0] - timedelta(minutes=1))

    def piece(name: str) -> Any:
        frame = spark.read.schema(FINGERPRINT).parquet(str(pieces / name))
        return frame.persist(KEPT)

    kept = KeptFingerprints(spark, world.state)  # the holding, fed pieces directly
    kept.pieces.append(piece("retained.parquet"))
    kept.pieces[0].count()
    if live is not None:
        from dgm.config.pipelines import PipelineConfig
        from spark_jobs.audit.audit import audit

        source = PipelineConfig(
            name="live", source_topics=(live[1],), consumer_group="g-live",
            declared_semantic="at-least-once",
        )  # fmt: skip
        config = replace(config, state_dir=world.state, pipelines=(*config.pipelines, source))
        # The generated topics are not on the broker: the audit reads the live one.
        audited_config = replace(config, pipelines=(source,))
    reader = SampleReader(world.state)
    engine = Engine()
    rows: list[dict[str, Any]] = []
    for cycle in range(cycles):
        now = min(stamps[cycle], datetime.now(UTC))
        if live is not None:  # the producers' and the collector's work, not the cycle's
            audit_throughput.fill(live[0], live[1], new, "stamped")
            audit_throughput.sample(live[0], world.state, [live[1]])
        began = time.perf_counter()
        if live is not None:
            audit(spark, audited_config, live[0])
            audited = time.perf_counter()
            fingerprints = kept.load()  # the batch the audit committed, read from disk
        else:
            audited = began
            before = kept._kept()
            added = piece(f"new-{cycle}.parquet")
            kept.pieces.append(added)
            current = kept._kept()
            fingerprints = Fingerprints(current, None, before, added, count=current.count())
        samples = reader.read_all()
        loaded = time.perf_counter()
        tables = analyze(spark, config, fingerprints, samples, now, engine)
        analyzed = time.perf_counter()
        publish(tables, world.state)
        done = time.perf_counter()
        row = {
            "cycle": cycle,
            "what": engine.last,
            "audit": audited - began,
            "load": loaded - audited,
            "analyze": analyzed - loaded,
            "publish": done - analyzed,
            "total": done - began,
        }
        rows.append(row)
        print(
            f"{size:,} + {cycle + 1} x {new:,}: {row['total']:.2f}s (audit {row['audit']:.2f}, "
            f"load {row['load']:.2f}, "
            f"analyze {row['analyze']:.2f}, publish {row['publish']:.2f}) {engine.last}",
            flush=True,
        )
    kept.reset()
    later = [r["total"] for r in rows[1:]]
    return {"size": size, "rebuild": rows[0]["total"], "cycle": statistics.median(later)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,3000000,10000000")
    parser.add_argument("--new", type=int, default=10_000)
    parser.add_argument("--cycles", type=int, default=6)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--audit", action="store_true", help="new records produced to a broker and audited"
    )
    args = parser.parse_args()
    from spark_jobs.session import build_session

    with tempfile.TemporaryDirectory(prefix="dgm-bench-cycle-") as tmp:
        cluster, live = None, None
        if args.audit:
            from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

            from embedded_kafka.cluster import EmbeddedCluster

            cluster = EmbeddedCluster(Path(tmp) / "kafka", brokers=1, die_with_parent=True)
            cluster.start(fresh=True)
            bootstrap = cluster.bootstrap_servers
            topic = "dgm-bench-live"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            made = admin.create_topics([NewTopic(topic, audit_throughput.PARTITIONS, 1)])
            made[topic].result(timeout=60)
            live = (bootstrap, topic)
        spark = build_session(master=args.master, app_name="dgm-bench-cycle")
        results = []
        try:
            for size in (int(s) for s in args.sizes.split(",")):
                with tempfile.TemporaryDirectory(prefix="dgm-bench-cycle-", dir=tmp) as one:
                    results.append(one_size(spark, Path(one), size, args.new, args.cycles, live))
        finally:
            spark.stop()
            if cluster is not None:
                cluster.stop()
    print("\n| retained | rebuild (first cycle) | cycle, median of the rest |")
    print("|---:|---:|---:|")
    for r in results:
        print(f"| {r['size']:,} | {r['rebuild']:.1f} s | {r['cycle']:.2f} s |")
    os.system("uptime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
