"""The producer stage and the end-to-end semantic of each pipeline (docs/design.md, "Stages
and the end-to-end semantic"), worked out on the driver from tables the engine already made.

A pipeline's verdict judges its copy step: duplicates its source already held are reported
as upstream, never counted against it. The producer is a stage too: what reached the first
source (its extra copies, its producers' sequence gaps, its records truncated logs lost) is
that stage's semantic. Pipelines
chain when one's source topic is another's sink; the end-to-end semantic composes the
producer stage and every pipeline from the first source to the last sink (verdict.compose).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dgm.config.document import DgmConfig
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.vocabulary import Achieved, LossCause
from spark_jobs.analyze import verdict

Row = dict[str, Any]


def chains(config: DgmConfig) -> dict[str, list[str]]:
    """pipeline -> the pipelines from a first source to it, in order (it last). A pipeline
    fed by several upstream pipelines lists each of their chains' members once, upstream
    first; a loop in the config stops where it would repeat a pipeline."""
    feeds = {p.name: _upstream(p, config.pipelines) for p in config.pipelines}

    def walk(name: str, seen: tuple[str, ...]) -> list[str]:
        order: list[str] = []
        for up in feeds[name]:
            if up not in seen:
                order += [n for n in walk(up, (*seen, up)) if n not in order]
        return [*order, name]

    return {p.name: walk(p.name, (p.name,)) for p in config.pipelines}


def _upstream(pipeline: PipelineConfig, pipelines: Sequence[PipelineConfig]) -> list[str]:
    return [
        other.name
        for other in pipelines
        if other.name != pipeline.name and set(other.sink_names()) & set(pipeline.source_topics)
    ]


def _topic_totals(topic_windows: pa.Table) -> dict[str, Row]:
    """topic -> its cumulative row (window_start null) of topic_windows."""
    cumulative = topic_windows.filter(pc.is_null(topic_windows["window_start"]))
    return {row["topic"]: row for row in cumulative.to_pylist()}


def _sequence_gaps(lost: pa.Table) -> dict[str, int]:
    """pipeline -> records missing from its source producers' sequences."""
    gaps: dict[str, int] = {}
    is_gap = pc.equal(lost["cause"], LossCause.SEQUENCE_GAP.value)
    for row in lost.filter(is_gap).select(["pipeline", "missing"]).to_pylist():
        gaps[row["pipeline"]] = gaps.get(row["pipeline"], 0) + (row["missing"] or 0)
    return gaps


def pipeline_stages(
    config: DgmConfig,
    verdicts: Sequence[Row],
    topic_windows: pa.Table,
    lost: pa.Table,
    sequenced: Collection[str] | None = None,
) -> list[Row]:
    """The pipeline_stages rows (dgm.contracts.published.PIPELINE_STAGES), one per pipeline.
    `sequenced`: the topics holding records of producer sessions (dgm-producer and dgm-seq),
    when known; a chain none of whose first sources holds any has its producers' sequence
    gaps unmeasured (null), not none."""
    by_name: Mapping[str, PipelineConfig] = {p.name: p for p in config.pipelines}
    achieved = {row["pipeline"]: Achieved(row["achieved"]) for row in verdicts}
    totals = _topic_totals(topic_windows)
    gaps = _sequence_gaps(lost)
    rows = []
    for name, chain in chains(config).items():
        firsts = [n for n in chain if not _upstream(by_name[n], config.pipelines)]
        sources = sorted({t for n in firsts for t in by_name[n].source_topics})
        held = [totals[t] for t in sources if t in totals]
        records = sum(r["records"] or 0 for r in held)
        copies = sum(r["duplicate_copies"] or 0 for r in held)
        distinct = sum(r["distinct_ids"] or 0 for r in held)
        missing = sum(gaps.get(n, 0) for n in firsts)
        measured = sequenced is None or any(t in sequenced for t in sources)
        truncated = sum(r.get("truncated_records") or 0 for r in held)
        producer = verdict.achieved(
            records, copies, missing + truncated, 0, config.analysis.min_records
        )
        stages = [producer, *(achieved.get(n, Achieved.INSUFFICIENT_EVIDENCE) for n in chain)]
        rows.append(
            {
                "pipeline": name,
                "chain": chain,
                "first_sources": sources,
                "producer_records": records,
                "producer_duplicate_copies": copies,
                "producer_duplicate_rate": copies / distinct if distinct else None,
                "producer_sequence_gaps": missing if measured else None,
                "producer_achieved": producer.value,
                "end_to_end_achieved": verdict.compose(stages).value,
                "producer_truncated_records": truncated,
            }
        )
    return rows
