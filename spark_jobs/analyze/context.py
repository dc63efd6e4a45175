"""The Context of a cycle: what every partition of the passes needs beyond its own records
(small, shipped with each task), worked out on the driver before the passes run from the
pipelines' roles (the config), the fingerprints' History (the oldest record held of each
partition and the dgm-src routes, from one small aggregate, `routes`; kept as Routes, which
a cycle merges with those of its new fingerprints) and the claims (claims.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dgm.config.document import DgmConfig
from spark_jobs.analyze import claims

_MICROS = 1_000_000


@dataclass(frozen=True)
class Context:
    """What every partition needs beyond its own records: small, shipped with the task."""

    # topic -> pipelines reading it (source) / writing it (sink, external names included)
    sources: Mapping[str, tuple[str, ...]]
    sinks: Mapping[str, tuple[str, ...]]
    # pipeline -> its source topics; plain topic (no pipeline's sink) -> the topics its
    # records name in dgm-src, the only source its duplicates' causes can look at
    source_topics: Mapping[str, tuple[str, ...]]
    plain_sources: Mapping[str, tuple[str, ...]]
    # (pipeline, topic, partition) -> claimed offset (claims.claimed_offsets)
    claimed: Mapping[tuple[str, str, int], int]
    # pipeline -> newest held_from (micros) of its sink partitions (claims.sink_held_from)
    sink_held_from: Mapping[str, int] = field(default_factory=dict)
    cutoff_us: int = 0  # the grace cutoff (claims.cutoff_us)
    window_us: int = 60_000_000
    # deadline-claim pipeline -> (deadline cutoff, max_delay), micros (claims.deadline_cutoffs)
    deadlines: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    # pipeline -> its latency_objective, micros (late.py): late records by arrivals
    objectives: Mapping[str, int] = field(default_factory=dict)
    # pipeline -> its `expected` predicate ("" for none): the fingerprints' filtered_by and
    # filter_undecided_by were marked under these (the engine rebuilds when they change)
    expected: Mapping[str, str] = field(default_factory=dict)
    # Topics kept 1 in N ids (dgm/contracts/sampling.py): their producer sessions and streams have
    # holes where the ids not kept were, so no sequence gap or order is looked for in them.
    sampled: Mapping[str, int] = field(default_factory=dict)  # topic -> N


@dataclass(frozen=True)
class History:
    """What the fingerprints say beyond any one id, from one aggregate query."""

    # (topic, partition) -> timestamp (micros, None when unknown) of the oldest held record,
    # for partitions not held from offset 0 (claims.held_from)
    held_from: dict[tuple[str, int], int | None]
    # (sink topic, src topic, src partition) -> highest committed src_offset
    src_offsets: dict[tuple[str, str, int], int]
    # topic -> topics its records name in dgm-src
    src_topics: dict[str, set[str]]


@dataclass(frozen=True)
class Routes:
    """What History is made of, for some of the fingerprints: the union of two sets of
    fingerprints has the `merged` Routes of theirs (so a cycle reads only its new rows)."""

    # (topic, partition) -> (offset, timestamp micros or None) of the oldest held record
    first: dict[tuple[str, int], tuple[int, int | None]] = field(default_factory=dict)
    src_offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)
    src_topics: dict[str, frozenset[str]] = field(default_factory=dict)
    # Topics holding a committed, identified record without dgm-src (lineage.unstamped_sinks)
    unstamped: frozenset[str] = frozenset()

    def merged(self, other: Routes) -> Routes:
        first = dict(self.first)
        for where, oldest in other.first.items():
            if where not in first or oldest[0] < first[where][0]:
                first[where] = oldest
        src_offsets = dict(self.src_offsets)
        for key, offset in other.src_offsets.items():
            src_offsets[key] = max(offset, src_offsets.get(key, offset))
        src_topics = dict(self.src_topics)
        for topic, named in other.src_topics.items():
            src_topics[topic] = src_topics.get(topic, frozenset()) | named
        return Routes(first, src_offsets, src_topics, self.unstamped | other.unstamped)

    def topics(self) -> list[str]:
        """Every topic of the fingerprints these are the Routes of, sorted."""
        return sorted({topic for topic, _ in self.first})

    def history(self) -> History:
        held = claims.held_from(self.first)
        topics = {topic: set(named) for topic, named in self.src_topics.items()}
        return History(held, dict(self.src_offsets), topics)


def _micros(at: datetime) -> int:
    return round(at.timestamp() * _MICROS)


def routes(fingerprints: DataFrame) -> Routes:
    """The Routes of `fingerprints`: one aggregate, a row per partition and dgm-src route."""
    # min and min_by, not min of a struct: a struct buffer makes Spark sort-aggregate
    # every row (6.6 s against 1.1 s at 10M fingerprints).
    per_route = fingerprints.groupBy(*_ROUTE).agg(
        F.min("offset").alias("first_offset"),
        F.min_by("timestamp", "offset").alias("first_timestamp"),
        F.max(F.when(F.col("committed"), F.col("src_offset"))).alias("src_offset"),
        F.max(F.col("committed") & F.col("message_id").isNotNull()).alias("identified"),
    )
    return _routes_of(per_route.toArrow())


def routes_in(rows: pa.Table) -> Routes:
    """`routes` of fingerprints already on the driver (a small cycle's: engine.py), without
    a Spark job: the same aggregate in Arrow."""
    if rows.num_rows == 0:
        return Routes()
    claimed = pc.if_else(rows["committed"], rows["src_offset"], pa.scalar(None, pa.int64()))
    identified = pc.and_(rows["committed"], pc.is_valid(rows["message_id"]))
    ordered = (
        rows.select([*_ROUTE, "offset", "timestamp"])
        .append_column("claimed_src", claimed)
        .append_column("identified", identified)
        .sort_by([("offset", "ascending")])
    )
    # Sorted by offset, and aggregated in order: each group's first timestamp is min_by's.
    per_route = ordered.group_by(list(_ROUTE), use_threads=False).aggregate(
        [("offset", "min"), ("timestamp", "first"), ("claimed_src", "max"), ("identified", "any")]
    )
    return _routes_of(
        per_route.rename_columns(
            {"offset_min": "first_offset", "timestamp_first": "first_timestamp",
             "claimed_src_max": "src_offset", "identified_any": "identified"}
        )
    )  # fmt: skip


_ROUTE = ("topic", "partition", "src_topic", "src_partition")


def _routes_of(per_route: pa.Table) -> Routes:
    first: dict[tuple[str, int], tuple[int, int | None]] = {}
    src_offsets: dict[tuple[str, str, int], int] = {}
    src_topics: dict[str, set[str]] = defaultdict(set)
    unstamped: set[str] = set()
    for row in per_route.to_pylist():
        where = (row["topic"], row["partition"])
        stamp = row["first_timestamp"]
        oldest = (row["first_offset"], None if stamp is None else _micros(stamp))
        if where not in first or oldest[0] < first[where][0]:
            first[where] = oldest
        if row["src_topic"] is None and row["identified"]:
            unstamped.add(row["topic"])
        if row["src_topic"] is not None:
            src_topics[row["topic"]].add(row["src_topic"])
            if row["src_partition"] is not None and row["src_offset"] is not None:
                src_offsets[(row["topic"], row["src_topic"], row["src_partition"])] = row[
                    "src_offset"
                ]
    src = {t: frozenset(us) for t, us in src_topics.items()}
    return Routes(first, src_offsets, src, frozenset(unstamped))


def history(fingerprints: DataFrame) -> History:
    return routes(fingerprints).history()


def context(
    config: DgmConfig, known: History, committed: dict[tuple[str, str, int], int], now: datetime
) -> Context:
    """The Context of a cycle: roles from `config`; claims (claims.claimed_offsets) from the
    group's `committed` offsets (pipeline, topic, partition) and the external sinks' own
    rows; each pipeline's claims.sink_held_from, the grace cutoff (claims.cutoff_us) and the
    deadline-claim pipelines' cutoffs (claims.deadline_cutoffs)."""
    sources: dict[str, list[str]] = defaultdict(list)
    sinks: dict[str, list[str]] = defaultdict(list)
    for p in config.pipelines:
        for topic in p.source_topics:
            sources[topic].append(p.name)
        for topic in p.sink_names():
            sinks[topic].append(p.name)
    sink_names = set(sinks)
    return Context(
        sources={t: tuple(ps) for t, ps in sources.items()},
        sinks={t: tuple(ps) for t, ps in sinks.items()},
        source_topics={p.name: tuple(p.source_topics) for p in config.pipelines},
        plain_sources={
            t: tuple(sorted(us)) for t, us in known.src_topics.items() if t not in sink_names
        },
        claimed=claims.claimed_offsets(config, committed, known.src_offsets),
        sink_held_from=claims.sink_held_from(config, known.held_from),
        cutoff_us=claims.cutoff_us(now, config.analysis.grace_s),
        window_us=config.analysis.window_s * _MICROS,
        deadlines=claims.deadline_cutoffs(config, now),
        objectives={
            p.name: round(o.total_seconds() * _MICROS)
            for p in config.pipelines
            if (o := p.objective()) is not None
        },
        expected={p.name: p.expected.strip() for p in config.pipelines},
        sampled=config.topic_one_in(),
    )
