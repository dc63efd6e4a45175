"""What explaining costs: an analysis cycle over 10M fingerprints of pipelines that stamp no dgm
header, with the explaining steps (docs/design.md, "Causes without dgm's headers", the id join
of "Order, beside the delivery semantic", "Delivery latency") and without them, side by side
in one process.

bench/generated.py's pipelines, made header-free: dgm-producer, dgm-seq and dgm-src are
dropped from every fingerprint (so every duplicate's cause is left to the evidence, and every
sink record's source position to the id join) and every fingerprint gets an arrival 0.2 s
after its timestamp (so every checked record has a delivery latency). The generated topics are
then written to a real embedded broker, each partition up to its highest generated offset
(small records, one idempotent producer), so the batch headers of the duplicate copies are read
from a real log at the copies' own coordinates: the reads cost what they would, though the
batches hold the filler's records, not the generated ones.

Two variants share the Spark session and the retained and new pieces, each with its own
engine, kept fingerprints and state directory, and take turns on every cycle (the order
alternating):

- `explained`: the analysis as it is, the copies' batch headers read through the real reader.
- `bare`: the same cycle without what explaining adds: the duplicates table is published as
  the engine found it (no batch header read, no cause from the evidence), the sink records
  keep no source position (no id join), and the fingerprints carry no arrival (so no latency
  is counted): what the analysis did before these steps.

The cost is (explained - bare) / explained per cycle, the median over the cycles after the
first (the first is each variant's rebuild, reported beside). The audit's own addition, the
arrivals it stamps on new records, is measured by bench/audit_throughput.py.

    DGM_SPARK_DRIVER_MEMORY=10g python -m bench.explain_cost [--size 10000000] [--new 10000]
        [--cycles 6] [--pipelines 10] [--partitions 50]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench import generated
from bench.cycle_time import sampled_before

HEADERS = ("producer", "seq", "lineage", "src_topic", "src_partition", "src_offset")
ARRIVAL_DELAY_US = 200_000


def header_free(table: pa.Table, arrivals: bool) -> pa.Table:
    """`table` without dgm's headers; with `arrivals`, each record arrived 0.2 s after its
    timestamp (exact to within a 1 s sample gap), else none known."""
    for name in HEADERS:
        index = table.schema.get_field_index(name)
        table = table.set_column(index, name, pa.nulls(table.num_rows, table.schema[index].type))
    at = table.schema.get_field_index("arrived_at")
    stamps = pc.cast(table["timestamp"], pa.int64())
    if arrivals:
        arrived = pc.cast(pc.add(stamps, ARRIVAL_DELAY_US), table.schema[at].type)
        resolution = pa.array([1_000_000] * table.num_rows, pa.int64())
    else:
        arrived = pa.nulls(table.num_rows, table.schema[at].type)
        resolution = pa.nulls(table.num_rows, pa.int64())
    table = table.set_column(at, "arrived_at", arrived)
    index = table.schema.get_field_index("arrival_resolution_us")
    return table.set_column(index, "arrival_resolution_us", resolution)


def in_reading_order(whole: pa.Table) -> pa.Table:
    """`whole` in the order an audit would read it: a record once it and every record below it
    in its partition were written (the newest timestamp up to its offset). By timestamp alone,
    a copy written late at a high offset would come before lower offsets of its partition,
    which no audit reads (it reads offsets in increasing ranges)."""

    frame = whole.select(["topic", "partition", "offset", "timestamp"]).to_pandas()
    frame["row"] = range(len(frame))
    frame = frame.sort_values(["topic", "partition", "offset"])
    frame["read_at"] = frame.groupby(["topic", "partition"])["timestamp"].cummax()
    order = frame.sort_values(["read_at", "topic", "partition", "offset"])["row"].to_numpy()
    return whole.take(pa.array(order))


def fill_topics(bootstrap: str, whole: pa.Table, partitions: int) -> float:
    """Every generated topic on the broker, each partition holding its generated offsets."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    ends = whole.select(["topic", "partition", "offset"]).group_by(["topic", "partition"])
    ends_table = ends.aggregate([("offset", "max")])
    topics = sorted(set(ends_table["topic"].to_pylist()))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for made in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
        made.result(timeout=60)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "lz4",
        }
    )
    began = time.perf_counter()
    rows = ends_table.to_pylist()
    for done, row in enumerate(rows):
        for n in range(row["offset_max"] + 1):
            while True:
                try:
                    producer.produce(row["topic"], b"%d" % n, partition=row["partition"])
                    break
                except BufferError:
                    producer.poll(0.05)
        if done % 50 == 49:
            print(f"  filled {done + 1}/{len(rows)} partitions", flush=True)
    assert producer.flush(300) == 0
    return time.perf_counter() - began


@contextlib.contextmanager
def bare() -> Iterator[None]:
    """The analysis without the explaining steps (see the module's docstring)."""
    import spark_jobs.analyze.analysis as analysis
    import spark_jobs.analyze.engine as engine  # its imported names, patched where used
    import spark_jobs.analyze.passes as passes

    saved = (analysis.explained_duplicates, passes.with_id_lineage)
    saved_engine = engine.unstamped_sinks
    analysis.explained_duplicates = lambda config, duplicates, samples, batches: duplicates
    passes.with_id_lineage = lambda fingerprints, ctx, held=None, sinks=None: fingerprints
    # No sink known to lack dgm-src: a cycle's id join and relinks (cycle_streams.py) join
    # nothing, as the rebuild's with_id_lineage does nothing.
    engine.unstamped_sinks = lambda frame, ctx, known=frozenset(): frozenset()
    try:
        yield
    finally:
        analysis.explained_duplicates, passes.with_id_lineage = saved
        engine.unstamped_sinks = saved_engine


@dataclass
class Variant:
    name: str
    state: Path
    pieces: str  # the folder of its retained and new pieces
    kept: Any = None
    engine: Any = None
    batches: Any = None
    times: list[float] = field(default_factory=list)
    copies: int = 0


def cycle(spark: Any, variant: Variant, config: Any, cycle_index: int, now: datetime) -> float:
    from spark_jobs.analysis_input import Fingerprints
    from spark_jobs.analyze.analysis import analyze
    from spark_jobs.analyze.publish import publish
    from spark_jobs.analyze.samples import SampleReader
    from spark_jobs.audit.incremental_load import KEPT
    from spark_jobs.schemas import FINGERPRINT

    def piece(name: str) -> Any:
        frame = spark.read.schema(FINGERPRINT).parquet(f"{variant.pieces}/{name}")
        return frame.persist(KEPT)  # as the job keeps them

    began = time.perf_counter()
    if cycle_index == 0:
        variant.kept.pieces.append(piece("retained.parquet"))
        current = variant.kept._kept()
        fingerprints = Fingerprints(current, count=current.count())
    else:
        before = variant.kept._kept()
        variant.kept.pieces.append(piece(f"new-{cycle_index - 1}.parquet"))
        current = variant.kept._kept()
        added = variant.kept.pieces[-1]
        fingerprints = Fingerprints(current, None, before, added, count=current.count())
    samples = SampleReader(variant.state).read_all()
    context = bare() if variant.name == "bare" else contextlib.nullcontext()
    spent: dict[str, float] = {}
    with context, timed_explaining(spent):
        analyzed = time.perf_counter()
        tables = analyze(spark, config, fingerprints, samples, now, variant.engine, variant.batches)
        spent["analyze"] = time.perf_counter() - analyzed
    published = time.perf_counter()
    publish(tables, variant.state)
    spent["publish"] = time.perf_counter() - published
    variant.copies = len(variant.batches.asked)  # copies whose batch was read
    took = time.perf_counter() - began
    steps = ", ".join(f"{k} {v:.1f}s" for k, v in spent.items())
    print(f"  {variant.name}: {took:.2f}s ({steps}), {variant.engine.last}", flush=True)
    return took


# The steps of analyze() outside the engine (spark_jobs/analyze/analysis.py), each timed as the
# explaining is: where a variant's time goes besides the engine's own timings.
STEPS = {
    "explained_duplicates": "explain duplicates",
    "kept_fingerprints": "kept",
    "latest_committed": "committed",
    "faults": "faults",
    "pipeline_tables": "pipeline tables",
    "with_latency": "latency",
    "pipeline_stages": "stages",
    "lagged_group_offsets": "lag",
    "group_status": "group status",
    "runs": "runs",
    "sample_tables": "samples",
    "with_cluster_columns": "clusters",
}


@contextlib.contextmanager
def timed_explaining(spent: dict[str, float]) -> Iterator[None]:
    """Time the duplicates' explaining (whichever function the variant runs) and analyze()'s
    other steps outside the engine into `spent`."""
    import spark_jobs.analyze.analysis as analysis
    from spark_jobs.analyze import integrity

    saved = {name: getattr(analysis, name) for name in STEPS}
    applied = integrity.applied

    profile_to = os.environ.get("DGM_BENCH_PROFILE_EXPLAIN")  # the last cycle's, in pstats

    def timing(label: str, function: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            explaining = label == "explain duplicates" and function.__name__ != "<lambda>"
            profile = cProfile.Profile() if profile_to and explaining else None  # not bare's
            try:
                if profile is None:
                    return function(*args, **kwargs)
                return profile.runcall(function, *args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - began
                if profile is not None and profile_to:
                    profile.dump_stats(profile_to)

        return timed

    for name, label in STEPS.items():
        setattr(analysis, name, timing(label, saved[name]))
    integrity.applied = timing("integrity", applied)
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(analysis, name, function)
        integrity.applied = applied


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--new", type=int, default=10_000)
    parser.add_argument("--cycles", type=int, default=6)
    parser.add_argument("--pipelines", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    from embedded_kafka.cluster import EmbeddedCluster
    from spark_jobs.analyze.copy_batches import CopyBatches
    from spark_jobs.analyze.engine import Engine
    from spark_jobs.audit.cluster_sources import kafka_sources
    from spark_jobs.audit.copy_producers import producers_of
    from spark_jobs.audit.incremental_load import KeptFingerprints
    from spark_jobs.session import build_session

    with tempfile.TemporaryDirectory(prefix="dgm-bench-explain-") as tmp:
        root = Path(tmp)
        total = int((args.size + args.new * args.cycles) * 1.05)
        began = time.perf_counter()
        world = generated.build(root / "world", total, args.pipelines, args.partitions)
        whole = in_reading_order(pq.read_table(world.folder))
        print(f"generated {whole.num_rows:,} fingerprints in {time.perf_counter() - began:.0f}s")
        stamps = [whole["timestamp"][args.size + (c + 1) * args.new - 1].as_py()
                  for c in range(args.cycles - 1)]  # fmt: skip
        retained_end = whole["timestamp"][args.size - 1].as_py()
        sampled_before(world.state, retained_end)
        variants = []
        for name, arrivals in (("explained", True), ("bare", False)):
            folder = root / f"pieces-{name}"
            folder.mkdir()
            made = header_free(whole, arrivals)
            pq.write_table(made.slice(0, args.size), folder / "retained.parquet")
            for c in range(args.cycles - 1):
                start = args.size + c * args.new
                pq.write_table(made.slice(start, args.new), folder / f"new-{c}.parquet")
            state = root / f"state-{name}"
            shutil.copytree(world.state, state)
            variants.append(Variant(name, state, str(folder)))
        cluster = EmbeddedCluster(root / "kafka", brokers=1, die_with_parent=True)
        cluster.start(fresh=True)
        spark = None
        try:
            filled = fill_topics(cluster.bootstrap_servers, whole, args.partitions)
            print(f"filled the broker in {filled:.0f}s")
            del whole
            config = generated.config(world.names)
            sources = kafka_sources(config, cluster.bootstrap_servers)
            spark = build_session(master=args.master, app_name="dgm-bench-explain")
            for v in variants:
                v.kept = KeptFingerprints(spark, v.state)
                v.engine = Engine()
                reader = (lambda c: producers_of(sources, c)) if v.name == "explained" else None
                v.batches = CopyBatches(reader)
            for c in range(args.cycles):
                now = (retained_end if c == 0 else stamps[c - 1]) + timedelta(seconds=1)
                now = min(now, datetime.now(UTC))
                order = variants if c % 2 == 0 else variants[::-1]
                for v in order:
                    v.times.append(cycle(spark, v, config, c, now))
                print(
                    f"cycle {c}: "
                    + ", ".join(f"{v.name} {v.times[-1]:.2f}s" for v in variants)
                    + f" (batches read for {variants[0].copies:,} copies)",
                    flush=True,
                )
        finally:
            if spark is not None:
                spark.stop()
            cluster.stop()
    explained, bare_ = variants
    shares = [(e - b) / e for e, b in zip(explained.times[1:], bare_.times[1:], strict=True)]
    print("\n| fingerprints | rebuild explained / bare | cycle explained / bare (median) | cost |")
    print("|---:|---:|---:|---:|")
    cycles = [statistics.median(v.times[1:]) for v in variants]
    print(
        f"| {args.size:,} | {explained.times[0]:.1f} / {bare_.times[0]:.1f} s "
        f"| {cycles[0]:.2f} / {cycles[1]:.2f} s | {statistics.median(shares):+.1%} |"
    )
    os.system("uptime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
