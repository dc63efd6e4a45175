"""Per-pipeline counts into verdicts and pipeline windows (the rules are verdict.py's).

The counts arrive summed per (pipeline, window) (counts.pipeline_counts), a few rows per
pipeline and window, so the tables are worked out on the driver in plain Python: each was a
Spark query of several joins that cost seconds per cycle for a few hundred rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from dgm.config.document import DgmConfig
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.sampling import rate_interval
from dgm.contracts.vocabulary import Claim
from spark_jobs.analyze import verdict
from spark_jobs.analyze.faults import CLUSTER_FAULTS, GROUP_FAULTS, PRODUCER_FAULTS, TOPIC_FAULTS
from spark_jobs.analyze.output import PIPELINE_COUNTS

# The per-pipeline counts: the engine's per-window sums, the faults counted here, and the
# truncations' (analyze/integrity.py).
COUNTS = (*PIPELINE_COUNTS, "faults_observed", "truncated_records", "inconsistent_offsets")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
Row = dict[str, Any]


def _at(micros: int | None) -> datetime | None:
    return None if micros is None else _EPOCH + timedelta(microseconds=micros)


def _micros(at: datetime) -> int:
    if at.tzinfo is None:  # Spark hands naive UTC
        at = at.replace(tzinfo=UTC)
    return (at - _EPOCH) // timedelta(microseconds=1)


def counted_faults(config: DgmConfig, fault_rows: pa.Table) -> list[tuple[str, int]]:
    """(pipeline, at micros) of the faults that count for each pipeline's evidence, one per
    event; cluster-wide events count for every pipeline with a topic on that cluster."""
    on_cluster = _pipelines_by_cluster(config)
    own = (*GROUP_FAULTS, *PRODUCER_FAULTS, *TOPIC_FAULTS)
    counted = []
    for row in fault_rows.select(["at", "event", "pipeline", "cluster"]).to_pylist():
        if row["at"] is None:
            continue
        if row["pipeline"] is not None and row["event"] in own:
            counted.append((row["pipeline"], _micros(row["at"])))
        elif row["event"] in CLUSTER_FAULTS:
            names = on_cluster.get(row["cluster"], ()) if row["cluster"] else on_cluster[None]
            counted += [(name, _micros(row["at"])) for name in names]
    return counted


def _pipelines_by_cluster(config: DgmConfig) -> dict[str | None, list[str]]:
    """cluster -> the pipelines with a source or sink topic on it; None -> every pipeline."""
    found: dict[str | None, list[str]] = {None: [p.name for p in config.pipelines]}
    for p in config.pipelines:
        for cluster in dict.fromkeys((p.source_cluster, p.sink_cluster)):
            found.setdefault(cluster, []).append(p.name)
    return found


def _rate(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def _judged(row: Row, declared: str, min_records: int, one_in: int) -> Row:
    achieved = verdict.achieved(
        row["records_checked"],
        row["duplicate_copies"],
        row["lost"],
        row["aborted_reads"],
        min_records,
    )
    return row | {
        "duplicate_rate": _rate(row["duplicate_copies"], row["distinct_ids"]),
        "loss_rate": _rate(row["lost"], row["records_checked"]),
        "achieved": achieved.value,
        "meets_declared": verdict.meets_declared(achieved, declared),
        "declared": declared,
        **_intervals(row, one_in),
    }


def _intervals(row: Row, one_in: int) -> Row:
    """The sample's share and the rates' 95% intervals (dgm/contracts/sampling.py)."""
    duplicates = rate_interval(row["duplicate_copies"], row["distinct_ids"], one_in)
    loss = rate_interval(row["lost"], row["records_checked"], one_in)
    return {
        "sample_one_in": one_in,
        "duplicate_rate_low": duplicates[0],
        "duplicate_rate_high": duplicates[1],
        "loss_rate_low": loss[0],
        "loss_rate_high": loss[1],
    }


def claim_of(pipeline: PipelineConfig, shared: Collection[str] = ()) -> tuple[Claim, str]:
    """(claim, detail) a pipeline's records are checked against, as the verdict names them:
    a deadline and its max_delay, an external sink's stored offsets (with its group's
    commits when it has a group), a share group's acknowledgements (`shared`: the pipelines
    whose group is one, analyze/share_groups.py), or the group's commits."""
    if pipeline.deadline() is not None:
        return Claim.DEADLINE, f"max_delay {pipeline.max_delay}"
    if pipeline.external_sink is not None:
        return Claim.SINK_OFFSETS, (
            f"table {pipeline.external_sink.table}, group {pipeline.consumer_group}"
        )
    if pipeline.name in shared:
        return Claim.SHARE_ACKNOWLEDGEMENTS, f"share group {pipeline.consumer_group}"
    return Claim.GROUP_COMMITS, f"group {pipeline.consumer_group}"


def _settle_us(pipeline: PipelineConfig, grace_s: float) -> int:
    """How long after a checked record a fault still weighs: its max_delay for a deadline
    claim (its copy may be written that late), the grace period otherwise."""
    delay = pipeline.deadline()
    return round((delay.total_seconds() if delay is not None else grace_s) * 1_000_000)


def _add(into: Row, counts: Mapping[str, Any]) -> None:
    for name in (*COUNTS, "distinct_ids"):
        into[name] += counts.get(name) or 0


def pipeline_tables(
    config: DgmConfig,
    counts: pa.Table,
    faults: Iterable[tuple[str, int]],
    more: Iterable[Mapping[str, Any]] = (),
    shared: Collection[str] = (),
) -> tuple[list[Row], list[Row]]:
    """(verdicts, pipeline_windows) rows from the per-pipeline counts (counts.pipeline_counts:
    per window, plus `total` rows holding the distinct ids over all time) and the counted
    faults; a fault weighs while the pipeline's checked records flowed (plus grace, or a
    deadline claim's max_delay). `more`: counts to add (pipeline, window_us or None for the
    totals alone, and any of COUNTS), the truncations' (analyze/integrity.py); `shared`: the
    share-group pipelines (claim_of)."""
    settings = config.analysis
    settle = {p.name: _settle_us(p, settings.grace_s) for p in config.pipelines}
    width = settings.window_s * 1_000_000
    zero = dict.fromkeys((*COUNTS, "distinct_ids"), 0)
    totals: dict[str, Row] = defaultdict(lambda: dict(zero))
    windows: dict[tuple[str, int], Row] = defaultdict(lambda: dict(zero))
    spans: dict[str, tuple[int, int]] = {}
    for row in counts.to_pylist():
        name = row["pipeline"]
        if row["total"]:
            totals[name]["distinct_ids"] += row["distinct_ids"] or 0
            continue
        _add(totals[name], {**row, "distinct_ids": 0})
        if row["window_us"] is not None:
            _add(windows[(name, row["window_us"])], row)
        if row["first_checked_us"] is not None:
            first, last = spans.get(name, (row["first_checked_us"], row["last_checked_us"]))
            spans[name] = (min(first, row["first_checked_us"]), max(last, row["last_checked_us"]))
    for extra in more:
        _add(totals[extra["pipeline"]], {**extra, "distinct_ids": 0})
        if extra["window_us"] is not None:
            _add(windows[(extra["pipeline"], extra["window_us"])], {**extra, "distinct_ids": 0})
    for name, at in faults:
        if name in spans and spans[name][0] <= at <= spans[name][1] + settle.get(name, 0):
            totals[name]["faults_observed"] += 1
            windows[(name, at - at % width)]["faults_observed"] += 1
    verdicts = []
    for p in config.pipelines:
        first, last = spans.get(p.name, (None, None))
        row = {"pipeline": p.name, **totals.get(p.name, zero)}
        verdicts.append(
            _judged(row, p.declared_semantic, settings.min_records, config.one_in(p))
            | {
                "evidence": verdict.evidence(row["records_checked"], row["faults_observed"]).value,
                "first_record_at": _at(first),
                "last_record_at": _at(last),
                "source_topics": list(p.source_topics),
                "sink": list(p.sink_names()),
                "consumer_group": p.consumer_group or None,
                "claim": claim_of(p, shared)[0].value,
                "claim_detail": claim_of(p, shared)[1],
                "source_cluster": p.source_cluster,
                "sink_cluster": p.sink_cluster,
            }
        )
    declared = {p.name: p.declared_semantic for p in config.pipelines}
    one_in = {p.name: config.one_in(p) for p in config.pipelines}
    per_window = [
        _judged(
            {"pipeline": name, "window_start": _at(start), **row},
            declared[name],
            settings.min_records,
            one_in[name],
        )
        for (name, start), row in sorted(windows.items())
        if name in declared
    ]
    return verdicts, per_window
