"""Everything about one message id, worked out where all its records are: its copies and
their cause, whether a pipeline lost it or read it from an aborted transaction, and its
share of the per-window counts.

Pure functions of pandas frames, run by spark_jobs.analyze.passes (`by_id`) inside each
partition of one shuffle of the fingerprints by message id (every record of an id, in every
topic, lands in one partition), so no per-table query needs its own shuffle. The words are
docs/design.md's; the rules are the duplicates and loss modules' functions, applied here to
each pipeline's rows (this module works out which rows those are: sources, sinks, routes);
the counts a partition emits (per_id_counts.py) are partial sums the engine adds up per key.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from dgm.contracts.clusters import EXTERNAL_PREFIX
from dgm.contracts.vocabulary import LossCause
from spark_jobs.analyze import duplicates as duplicate_rules
from spark_jobs.analyze import late as late_rules
from spark_jobs.analyze import loss as loss_rules
from spark_jobs.analyze.context import Context
from spark_jobs.analyze.id_frame import (
    ABSENT,
    Names,
    frame_of,
    marked,
    named,
    per_pipeline,
    row_pairs,
)
from spark_jobs.analyze.latency import KIND as LATENCY
from spark_jobs.analyze.latency import bucket_of
from spark_jobs.analyze.output import rows_of
from spark_jobs.analyze.per_id_counts import (
    counted,
    partition_counts,
    pipeline_counts,
    topic_counts,
)

# The fingerprint columns the per-id work reads (passes.by_id ships no others; src_* are
# dgm-src parsed, which the causes compare raw as `lineage`).
COLUMNS = (
    "topic", "partition", "offset", "timestamp", "message_id", "key", "producer", "seq",
    "lineage", "committed", "filtered_by", "filter_undecided_by", "arrived_at",
)  # fmt: skip


def _routes(sink_topics: np.ndarray, context: Context, names: Names) -> pd.DataFrame:
    """(topic, pipeline, source_topic) codes: where a duplicated id of each sink topic may
    come from (pipeline ABSENT for a topic that is no pipeline's sink; source_topic ABSENT
    when there is none or this partition holds none of it)."""
    mapping: list[tuple[int, int, int]] = []
    for topic, pipelines in context.sinks.items():
        code = names.topic(topic)
        if code != ABSENT:
            for p in pipelines:
                mapping += [
                    (code, names.pipeline(p), names.topic(u))
                    for u in context.source_topics[p] or (None,)
                ]
    for code in sink_topics:
        topic = names.topics[code]
        if topic not in context.sinks:
            mapping += [
                (code, ABSENT, names.topic(u)) for u in context.plain_sources.get(topic) or (None,)
            ]
    return pd.DataFrame(mapping, columns=["topic", "pipeline", "source_topic"], dtype="int64")


def causes(
    frame: pd.DataFrame, batch: pa.Table, copied: pd.DataFrame, context: Context, names: Names
) -> pd.DataFrame:
    """(topic, message_id, pipeline, cause) per duplicated id of `copied` and each pipeline
    whose sink the topic is (pipeline ABSENT for a topic that is no pipeline's sink)."""
    if copied.empty:
        return pd.DataFrame(
            {
                "topic": pd.Series(dtype="int64"),
                "message_id": pd.Series(dtype="int64"),
                "pipeline": pd.Series(dtype="int64"),
                "cause": pd.Series(dtype=object),
                "source_topic": pd.Series(dtype="float64"),
                "source_partition": pd.Series(dtype="float64"),
                "source_offset": pd.Series(dtype="float64"),
            }
        )
    # The sink-side evidence, for copies only: taken from the records, not carried by all.
    evidence = batch.select(["producer", "seq", "lineage"]).take(pa.array(copied["_row"]))
    producer, seq, lineage = (evidence.column(n).to_pandas() for n in evidence.column_names)
    producer.index = seq.index = lineage.index = copied.index
    sink_side = duplicate_rules.sink_evidence(copied, producer, seq, lineage)
    routes = _routes(sink_side["topic"].unique(), context, names)
    # The source records of the duplicated ids only: grouping every id cost a tenth of per_id.
    held = frame[frame["has_id"] & frame["message_id"].isin(copied["message_id"].unique())]
    source = (
        held.groupby(["topic", "message_id"])["committed"]
        .agg(committed_copies="sum", records="size")
        .reset_index()
        .rename(columns={"topic": "source_topic"})
    )
    routed = sink_side.merge(routes, on="topic").merge(
        source, on=["source_topic", "message_id"], how="left"
    )
    routed = routed.fillna({"committed_copies": 0, "records": 0})
    # The source topic holding the id committed, for the id join (joined_sources).
    routed["holding"] = routed["source_topic"].where(routed["committed_copies"] > 0)
    per_key = (
        routed.groupby(["topic", "message_id", "pipeline"])
        .agg(
            committed_copies=("committed_copies", "sum"),
            records=("records", "sum"),
            repeated_send=("repeated_send", "first"),
            repeated_source=("repeated_source", "first"),
            source_topic=("holding", "max"),
        )
        .reset_index()
    )
    cause = duplicate_rules.cause(
        per_key["committed_copies"],
        per_key["records"],
        per_key["repeated_send"],
        per_key["repeated_source"],
    )
    found = per_key[["topic", "message_id", "pipeline"]].assign(cause=cause)
    return found.join(joined_sources(held, per_key))


def joined_sources(held: pd.DataFrame, per_key: pd.DataFrame) -> pd.DataFrame:
    """(source_topic, source_partition, source_offset) per row of `per_key`: the id's one
    committed record in the pipeline's source topics, the id join of docs/design.md,
    "Causes without dgm's headers"; null when it holds none or more than one (which one a
    copy was made from cannot be told)."""
    unique = per_key["committed_copies"] == 1
    keys = per_key.loc[unique, ["source_topic", "message_id"]]
    committed = held[held["committed"]][["topic", "message_id", "partition", "offset"]]
    found = keys.reset_index().merge(
        committed.rename(columns={"topic": "source_topic"}), on=["source_topic", "message_id"]
    )
    found = found.set_index("index")
    return pd.DataFrame(
        {
            "source_topic": found["source_topic"],
            "source_partition": found["partition"],
            "source_offset": found["offset"],
        },
        index=per_key.index,
    )


def duplicates(
    frame: pd.DataFrame, batch: pa.Table, context: Context, names: Names
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(copies, duplicates): every copy, and every copy once per cause row of its id."""
    copied = duplicate_rules.copies(frame)
    found = causes(frame, batch, copied, context, names)
    rows = copied.merge(found, on=["topic", "message_id"])
    codes = rows["source_topic"]
    joined = codes.notna()
    source_topic = pd.Series(None, index=rows.index, dtype=object)
    source_topic[joined] = names.topic_names(codes[joined].astype("int64"))
    return copied, rows.assign(source_topic=source_topic)


def deadlines(context: Context, names: Names) -> pd.DataFrame:
    """(pipeline, deadline_us, max_delay_us) of the deadline-claim pipelines, in codes."""
    return pd.DataFrame(
        [(names.pipeline(p), cut, delay) for p, (cut, delay) in context.deadlines.items()],
        columns=["pipeline", "deadline_us", "max_delay_us"],
        dtype="int64",
    )


def loss(
    sources: pd.DataFrame, sinks: pd.DataFrame, context: Context, names: Names
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """loss.lost (checked, lost) of `sources` (identified source rows per pipeline) and `sinks`
    (committed sink rows per pipeline), with the Context's claims and deadlines in this
    partition's codes."""
    claims = pd.DataFrame(
        [
            (names.pipeline(p), names.topic(t), part, offset)
            for (p, t, part), offset in context.claimed.items()
        ],
        columns=["pipeline", "topic", "partition", "claimed_offset"],
        dtype="int64",
    )
    held = {names.pipeline(p): at for p, at in context.sink_held_from.items()}
    return loss_rules.lost(
        sources, sinks, claims, context.cutoff_us, held, deadlines(context, names)
    )


def late(
    first: pd.DataFrame,
    sinks: pd.DataFrame,
    arrived_us: pd.Series,
    context: Context,
    names: Names,
) -> pd.DataFrame:
    """late.late: the late records of the pipelines with a latency objective (by arrivals)
    and of the deadline pipelines without one (by timestamps); none without either.
    `first`: late.first_checked of the checked rows."""
    objectives = {names.pipeline(p): us for p, us in context.objectives.items()}
    by_deadline = {
        names.pipeline(p): delay
        for p, (_, delay) in context.deadlines.items()
        if p not in context.objectives
    }
    if not objectives and not by_deadline:
        return late_rules.none(first)
    return late_rules.late(first, sinks, arrived_us, objectives, by_deadline)


def first_checked(checked: pd.DataFrame, arrived_us: pd.Series, context: Context) -> pd.DataFrame:
    """late.first_checked, when a late or latency rule reads it: a sort of every checked
    row, which a partition without arrivals and without late rules skips (its rows: none)."""
    if context.objectives or context.deadlines or arrived_us.notna().any():
        return late_rules.first_checked(checked)
    return checked.iloc[0:0]


def late_rows(found: pd.DataFrame, names: Names) -> pd.DataFrame:
    """Late records as output rows: the source record (topic, partition, offset by `_row`),
    its delay, how it was measured and its first sink copy as 'topic/partition/offset'."""
    copy = found["copy_topic"].astype("int64")
    first_copy = [
        f"{t}/{p}/{o}"
        for t, p, o in zip(names.topic_names(copy), found["copy_partition"].astype("int64"),
                           found["copy_offset"].astype("int64"), strict=True)
    ]  # fmt: skip
    return found[["pipeline", "message_id", "topic", "partition", "_row"]].assign(
        delay_us=found["delay_us"].round().astype("int64"),
        measured_by=found["measured_by"].astype(object),
        first_copy=pd.Series(first_copy, index=found.index, dtype=object),
    )


def loss_causes(first_lost: pd.DataFrame, context: Context, names: Names) -> pd.Series:
    """The cause of each lost row: a deadline claim's, or a group claim's."""
    by_deadline = first_lost["pipeline"].isin([names.pipeline(p) for p in context.deadlines])
    return by_deadline.map(
        {
            True: LossCause.NOT_IN_SINK_WITHIN_MAX_DELAY.value,
            False: LossCause.NOT_IN_SINK.value,
        }
    ).astype(object)


def with_causes(
    first_lost: pd.DataFrame, aborted: pd.DataFrame, context: Context, names: Names
) -> pd.DataFrame:
    """`first_lost` with `cause` and, for a torn commit (a group or sink-offset claim's lost
    id the sink holds in aborted transactions; loss.first_aborted_copies), its first aborted
    sink copy as `aborted_copy` ('topic/partition/offset'). `aborted`: identified aborted
    sink rows per pipeline."""
    cause = loss_causes(first_lost, context, names)
    copies = loss_rules.first_aborted_copies(aborted)
    keys = ["pipeline", "message_id"]
    found = first_lost[keys].merge(copies, on=keys, how="left").set_index(first_lost.index)
    torn = found["offset"].notna() & (cause == LossCause.NOT_IN_SINK.value)
    shown = pd.Series(None, index=first_lost.index, dtype=object)
    if torn.any():
        held = found[torn]
        topics = names.topic_names(held["topic"].astype("int64"))
        shown[torn] = [
            f"{t}/{p}/{o}"
            for t, p, o in zip(topics, held["partition"].astype("int64"),
                               held["offset"].astype("int64"), strict=True)
        ]  # fmt: skip
    return first_lost.assign(
        missing=1, cause=cause.where(~torn, LossCause.TORN_COMMIT.value), aborted_copy=shown
    )


def _pipelines(context: Context) -> set[str]:
    listed = [*context.sources.values(), *context.sinks.values()]
    return {*context.source_topics, *(p for ps in listed for p in ps)}


def expected_sources(
    frame: pd.DataFrame, batch: pa.Table, sources: pd.DataFrame, context: Context, names: Names
) -> tuple[pd.DataFrame, tuple[pd.DataFrame, pd.DataFrame] | None]:
    """(the identified source rows per pipeline its predicate does not filter; the committed
    source rows per pipeline filtered, and those undecided), docs/design.md's "filtered".
    (sources, None) when no record of this partition is marked."""
    filtered = marked(batch, "filtered_by", names)
    undecided = marked(batch, "filter_undecided_by", names)
    if filtered.empty and undecided.empty:
        return sources, None
    committed = per_pipeline(frame[frame["committed"]], names.by_topic(context.sources), "int64")
    pairs = row_pairs(committed)
    kept = sources[~row_pairs(sources).isin(filtered)]
    return kept, (committed[pairs.isin(filtered)], committed[pairs.isin(undecided)])


def per_id_rows(batch: pa.Table, context: Context) -> pa.Table:
    """Every output row one partition of id-shuffled fingerprints gives (output.SCHEMA)."""
    frame, names = frame_of(batch, _pipelines(context))
    # Each pipeline's rows, picked out once: its identified source rows, committed sink rows,
    # committed source rows without an id, and aborted sink rows (a Kafka sink's only: an
    # external table holds what it committed).
    by_source = names.by_topic(context.sources)
    held = per_pipeline(frame[frame["has_id"]], by_source, "int64")
    sinks = per_pipeline(frame[frame["committed"]], names.by_topic(context.sinks), "int64")
    unidentified = per_pipeline(frame[frame["committed"] & ~frame["has_id"]], by_source, "int64")
    kafka_sinks = {t: ps for t, ps in context.sinks.items() if not t.startswith(EXTERNAL_PREFIX)}
    aborted = frame[~frame["committed"] & frame["has_id"]]
    aborted = per_pipeline(aborted, names.by_topic(kafka_sinks), "int64")
    sources, flagged = expected_sources(frame, batch, held, context, names)
    copied, duplicate_rows = duplicates(frame, batch, context, names)
    checked, first_lost = loss(sources, sinks, context, names)
    first_lost = with_causes(first_lost, aborted, context, names)
    w = context.window_us
    arrived = arrivals_of(batch)
    first = first_checked(checked, arrived, context)
    late_found = late(first, sinks, arrived, context, names)
    counts = pipeline_counts(
        sinks,
        duplicate_rows,
        checked,
        first_lost,
        loss_rules.aborted_reads(held, sinks),
        unidentified,
        w,
        late_found,
        flagged,
    )
    topics, partitions = topic_counts(frame, copied, w), partition_counts(copied, w)
    return rows_of(
        batch,
        duplicates=named(duplicate_rows, names),
        lost=named(first_lost, names),
        pipeline=named(counts, names),
        topic=named(topics, names),
        partition=named(partitions, names),
        late=named(late_rows(late_found, names), names),
        **{LATENCY: named(latency_counts(first, sinks, arrived, w), names)},
    )


def latency_counts(
    first: pd.DataFrame, sinks: pd.DataFrame, arrived_us: pd.Series, window_us: int
) -> pd.DataFrame:
    """(pipeline, window_us, partition = latency bucket, delivered, total) of the checked
    records whose delivery latency is known (late.by_arrivals; `first`: late.first_checked
    of the checked rows)."""
    found = late_rules.by_arrivals(first, sinks, arrived_us)
    rows = counted(found, window_us, delivered=1).assign(
        partition=bucket_of(found["delay_us"].to_numpy())
    )
    summed = rows.groupby(["pipeline", "window_us", "partition"], as_index=False).sum()
    return summed.assign(total=False)


def arrivals_of(batch: pa.Table) -> pd.Series:
    """Each row's arrival micros (NaN when unknown), by its `_row`."""
    stamps = batch.column("arrived_at").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    return stamps.to_pandas().astype("float64")
