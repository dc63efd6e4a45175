"""Truncated records and inconsistent offsets (docs/design.md, "Log integrity"), from the
displaced fingerprints the audit's re-read set aside (audit/reread.py), on the driver.

They are few (a truncation displaces the records past one offset of one partition), so each
cycle works them out whole: the published `log_anomalies` rows, their counts per topic and per
pipeline window, and the losses they cause. A truncated record of a pipeline's source topic
that no committed sink record of the pipeline carries is lost with the cause truncation once
it is older than the pipeline's cutoff; a lost row whose id had sink copies that were all
truncated takes that cause instead of *not in sink*. The truncated records of a producer
session count as present in its sequence runs (engine.published), so none is lost twice.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dgm.config.document import DgmConfig
from dgm.contracts import published as tables
from dgm.contracts.fingerprints import DISPLACED as ARROW_DISPLACED
from dgm.contracts.vocabulary import Anomaly, LossCause
from spark_jobs.analyze.publish import conform_arrow

# What the re-read adds to a displaced fingerprint's columns (dgm.contracts.fingerprints.DISPLACED).
STAMP = pa.timestamp("us", tz="UTC")
COUNTS = ("truncated_records", "inconsistent_offsets")


def truncated(displaced: pa.Table) -> pa.Table:
    """The truncated records: committed displaced rows."""
    return displaced.filter(displaced["committed"])


def inconsistent(displaced: pa.Table) -> pa.Table:
    """The inconsistent offsets: displaced rows whose offset another record holds now."""
    return displaced.filter(displaced["overwritten"])


def log_anomalies(displaced: pa.Table) -> pa.Table:
    """dgm.contracts.published.LOG_ANOMALIES rows: one per truncated record and per inconsistent
    offset (a committed record whose offset another id took is both)."""
    parts = []
    for anomaly, rows in (
        (Anomaly.TRUNCATED_RECORD, truncated(displaced)),
        (Anomaly.INCONSISTENT_OFFSET, inconsistent(displaced)),
    ):
        n = rows.num_rows
        parts.append(
            pa.table(
                {
                    "anomaly": pa.array([anomaly.value] * n, pa.string()),
                    "jepsen": pa.array([anomaly.jepsen] * n, pa.string()),
                    **{c: rows[c] for c in _RECORD},
                }
            )
        )
    return conform_arrow(pa.concat_tables(parts), tables.LOG_ANOMALIES)


_RECORD = (
    "topic", "partition", "offset", "message_id", "now_message_id", "timestamp", "key",
    "producer", "seq", "detected_at",
)  # fmt: skip


def _windows(rows: pa.Table, window_us: int) -> pd.Series:
    """The window (micros) of each row's audited record; NaN without a timestamp."""
    micros = rows["timestamp"].cast(STAMP).cast(pa.int64()).to_pandas().astype("float64")
    return micros - micros % window_us


def _counted(displaced: pa.Table, window_us: int) -> pd.DataFrame:
    """(topic, window_us, truncated_records, inconsistent_offsets) per anomaly."""
    parts = [
        pd.DataFrame(
            {"topic": rows["topic"].to_pandas(), "window_us": _windows(rows, window_us)}
        ).assign(**{c: int(c == name) for c in COUNTS})
        for name, rows in (
            ("truncated_records", truncated(displaced)),
            ("inconsistent_offsets", inconsistent(displaced)),
        )
    ]
    return pd.concat(parts, ignore_index=True)


def topic_counts(displaced: pa.Table, window_us: int) -> pd.DataFrame:
    """(topic, window_us, truncated_records, inconsistent_offsets): per window of the
    audited record's timestamp and, window_us NaN, in total (untimed ones in total only)."""
    rows = _counted(displaced, window_us)
    timed = rows[rows["window_us"].notna()].groupby(["topic", "window_us"])[list(COUNTS)].sum()
    total = rows.groupby("topic")[list(COUNTS)].sum().assign(window_us=float("nan"))
    return pd.concat([timed.reset_index(), total.reset_index()], ignore_index=True)


def with_topic_counts(topic_windows: pa.Table, counts: pd.DataFrame) -> pa.Table:
    """topic_windows with its truncated_records and inconsistent_offsets filled in from
    `counts` (topic_counts), a row added for a window that holds only anomalies."""
    base = topic_windows.to_pandas()
    key = ["topic", "window_us"]
    base["window_us"] = topic_windows["window_start"].cast(pa.int64()).to_pandas().astype("float64")
    extra = counts.astype({"window_us": "float64"})
    merged = base.drop(columns=[c for c in COUNTS if c in base]).merge(extra, on=key, how="outer")
    merged[list(COUNTS)] = merged[list(COUNTS)].fillna(0).astype("int64")
    for column in ("records", "distinct_ids", "duplicate_copies", "unidentified", "aborted"):
        merged[column] = merged[column].fillna(0).astype("int64")
    windows = merged["window_us"]
    micros = windows.fillna(0).to_numpy().astype("int64")
    stamps = pa.array(micros, pa.int64(), mask=windows.isna().to_numpy()).cast(STAMP)
    merged = merged.drop(columns=["window_us", "window_start"])
    table = pa.Table.from_pandas(merged, preserve_index=False)
    return conform_arrow(table.append_column("window_start", stamps), tables.TOPIC_WINDOWS)


def _topics(config: DgmConfig) -> dict[str, list[str]]:
    """topic -> the pipelines whose source or sink topic it is."""
    found: dict[str, list[str]] = {}
    for p in config.pipelines:
        for topic in dict.fromkeys((*p.source_topics, *p.sink_names())):
            found.setdefault(topic, []).append(p.name)
    return found


def pipeline_counts(displaced: pa.Table, config: DgmConfig, window_us: int) -> pd.DataFrame:
    """(pipeline, window_us, truncated_records, inconsistent_offsets) per window of the
    records of each pipeline's source and sink topics (window_us NaN without a time)."""
    rows = _counted(displaced, window_us)
    pipelines = _topics(config)
    named = rows.assign(pipeline=rows["topic"].map(lambda t: pipelines.get(t, []))).explode(
        "pipeline"
    )
    named = named[named["pipeline"].notna()]
    summed = named.groupby(["pipeline", "window_us"], dropna=False)[list(COUNTS)].sum()
    return summed.reset_index()


@dataclass(frozen=True)
class Losses:
    """The losses truncation causes: lost rows to add, and the (pipeline, message id) of the
    lost rows whose cause is truncation."""

    added: pa.Table  # dgm.contracts.published.LOST rows
    relabelled: frozenset[tuple[str, str]]


def truncation_losses(
    displaced: pa.Table,
    config: DgmConfig,
    delivered: Collection[tuple[str, str]],
    cutoffs: Mapping[str, int],
) -> Losses:
    """Truncated source records no committed sink record of their pipeline carries
    (`delivered`: (pipeline, message id) of the live sink copies of truncated ids), older
    than the pipeline's cutoff (micros): lost, cause truncation. And the ids whose sink copies
    were truncated, for the pipelines that lost them: their lost rows take the cause."""
    records = truncated(displaced)
    gone = records.filter(pc.is_valid(records["message_id"]))
    micros = gone["timestamp"].cast(STAMP).cast(pa.int64()).to_pylist()
    sources: dict[str, list[str]] = {}
    sinks: dict[str, list[str]] = {}
    for p in config.pipelines:
        for topic in p.source_topics:
            sources.setdefault(topic, []).append(p.name)
        for topic in p.sink_names():
            sinks.setdefault(topic, []).append(p.name)
    added = []
    relabelled = set()
    for row, at in zip(gone.to_pylist(), micros, strict=True):
        for name in sinks.get(row["topic"], ()):
            relabelled.add((name, row["message_id"]))
        for name in sources.get(row["topic"], ()):
            old_enough = at is not None and at < cutoffs.get(name, 0)
            if old_enough and (name, row["message_id"]) not in delivered:
                added.append(
                    {
                        "pipeline": name,
                        **{c: row[c] for c in ("message_id", "topic", "partition", "offset")},
                        **{c: row[c] for c in ("timestamp", "producer", "seq")},
                        "missing": 1,
                        "cause": LossCause.TRUNCATION.value,
                    }
                )
    table = pa.Table.from_pylist(added, schema=_lost_schema())
    return Losses(conform_arrow(table, tables.LOST), frozenset(relabelled - set(delivered)))


def _lost_schema() -> pa.Schema:
    return pa.schema(
        [
            ("pipeline", pa.string()), ("message_id", pa.string()), ("topic", pa.string()),
            ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", STAMP),
            ("producer", pa.string()), ("seq", pa.int64()), ("missing", pa.int64()),
            ("cause", pa.string()),
        ]
    )  # fmt: skip


def relabel(lost: pa.Table, relabelled: Iterable[tuple[str, str]]) -> pa.Table:
    """`lost` with the cause truncation on the rows of `relabelled` (pipeline, message id)."""
    keys = set(relabelled)
    if not keys or lost.num_rows == 0:
        return lost
    pipelines, ids = lost["pipeline"].to_pylist(), lost["message_id"].to_pylist()
    hit = pa.array([(p, i) in keys for p, i in zip(pipelines, ids, strict=True)])
    cause = pc.if_else(hit, LossCause.TRUNCATION.value, lost["cause"])
    return lost.set_column(lost.schema.get_field_index("cause"), "cause", cause)


def delivered(whole: DataFrame, displaced: pa.Table, config: DgmConfig) -> set[tuple[str, str]]:
    """(pipeline, message id) of the truncated source records' ids that a committed record
    of the pipeline's sink carries now."""
    records = truncated(displaced)
    ids = sorted(set(records.filter(pc.is_valid(records["message_id"]))["message_id"].to_pylist()))
    sinks: dict[str, list[str]] = {}
    for p in config.pipelines:
        for topic in p.sink_names():
            sinks.setdefault(topic, []).append(p.name)
    if not ids or not sinks:
        return set()
    wanted = F.broadcast(
        whole.sparkSession.createDataFrame([(i,) for i in ids], "message_id string")
    )
    held = (
        whole.where(F.col("committed") & F.col("topic").isin(*sorted(sinks)))
        .join(wanted, "message_id", "left_semi")
        .select("topic", "message_id")
        .distinct()
        .collect()
    )
    return {(name, row["message_id"]) for row in held for name in sinks[row["topic"]]}


def cutoffs(
    config: DgmConfig, cutoff_us: int, deadlines: Mapping[str, tuple[int, int]]
) -> dict[str, int]:
    """pipeline -> the time (micros) its records must be older than to be judged: its
    deadline cutoff under a deadline claim, the grace cutoff otherwise."""
    return {
        p.name: deadlines[p.name][0] if p.name in deadlines else cutoff_us for p in config.pipelines
    }


def applied(
    config: DgmConfig,
    record_tables: Mapping[str, pa.Table],
    displaced: pa.Table | None,
    whole: DataFrame,
    window_us: int,
    cutoff_by_pipeline: Mapping[str, int],
) -> tuple[dict[str, pa.Table], list[dict[str, Any]]]:
    """The engine's record tables with the truncations in (log_anomalies, topic_windows'
    counts, the lost rows they add or name the cause of), and the per-pipeline window counts
    to add (pipeline, window_us (None: totals only), truncated_records, inconsistent_offsets,
    lost)."""
    aside = ARROW_DISPLACED.empty_table() if displaced is None else displaced
    found = dict(record_tables)
    found[tables.LOG_ANOMALIES.name] = log_anomalies(aside)
    found[tables.TOPIC_WINDOWS.name] = with_topic_counts(
        record_tables[tables.TOPIC_WINDOWS.name], topic_counts(aside, window_us)
    )
    counts = pipeline_counts(aside, config, window_us).to_dict("records")
    if truncated(aside).num_rows:
        losses = truncation_losses(
            aside, config, delivered(whole, aside, config), cutoff_by_pipeline
        )
        lost = relabel(record_tables[tables.LOST.name], losses.relabelled)
        found[tables.LOST.name] = pa.concat_tables([lost, losses.added])
        micros = losses.added["timestamp"].cast(STAMP).cast(pa.int64()).to_pylist()
        for name, at in zip(losses.added["pipeline"].to_pylist(), micros, strict=True):
            window = None if at is None else at - at % window_us
            counts.append({"pipeline": name, "window_us": window, "lost": 1})
    for row in counts:
        window = row["window_us"]
        row["window_us"] = None if window is None or window != window else int(window)
    return found, counts
