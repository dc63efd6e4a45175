"""The producer stage and the end-to-end semantic: stages.pipeline_stages, verdict.compose."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from dgm.config.analysis import AnalysisSettings
from dgm.config.document import DgmConfig
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.published import LOST, PIPELINE_STAGES, TOPIC_WINDOWS
from dgm.contracts.vocabulary import Achieved, LossCause
from spark_jobs.analyze.stages import chains, pipeline_stages
from spark_jobs.analyze.verdict import compose

EO, ALO, AMO = Achieved.EXACTLY_ONCE, Achieved.AT_LEAST_ONCE, Achieved.AT_MOST_ONCE
NG, IE = Achieved.NO_GUARANTEE, Achieved.INSUFFICIENT_EVIDENCE


@pytest.mark.parametrize(
    ("stages", "composed"),
    [
        ((EO, EO), EO),
        ((EO, ALO), ALO),
        ((ALO, ALO), ALO),
        ((AMO, EO, AMO), AMO),
        ((ALO, AMO), NG),
        ((EO, NG), NG),
        ((EO, IE), IE),
        ((ALO, IE, AMO), NG),  # a loss and a duplicate were seen: no evidence can undo that
        ((), IE),
    ],
)
def test_compose(stages: tuple[Achieved, ...], composed: Achieved) -> None:
    assert compose(stages) == composed


def _pipeline(name: str, sources: tuple[str, ...], sinks: tuple[str, ...]) -> PipelineConfig:
    return PipelineConfig(
        name=name,
        source_topics=sources,
        sink_topics=sinks,
        consumer_group=f"g-{name}",
        declared_semantic="exactly-once",
    )


def _config(*pipelines: PipelineConfig) -> DgmConfig:
    return DgmConfig(
        state_dir=Path("/nonexistent"),
        pipelines=pipelines,
        analysis=AnalysisSettings(min_records=1),
    )


def test_chains_follow_sinks_into_sources() -> None:
    config = _config(
        _pipeline("enrich", ("orders",), ("orders-enriched",)),
        _pipeline("load", ("orders-enriched",), ("orders-loaded",)),
        _pipeline("audit", ("orders-loaded", "refunds"), ("audit-log",)),
        _pipeline("other", ("clicks",), ("clicks-copy",)),
    )
    assert chains(config) == {
        "enrich": ["enrich"],
        "load": ["enrich", "load"],
        "audit": ["enrich", "load", "audit"],
        "other": ["other"],
    }


def test_a_loop_in_the_config_ends_where_it_would_repeat() -> None:
    config = _config(_pipeline("a", ("x",), ("y",)), _pipeline("b", ("y",), ("x",)))
    assert chains(config) == {"a": ["b", "a"], "b": ["a", "b"]}


def _topic_rows(rows: list[dict[str, object]]) -> pa.Table:
    schema = pa.schema(
        [
            (c.name, pa.timestamp("us", tz="UTC") if c.name == "window_start" else pa.int64())
            if c.name != "topic" and c.name != "duplicate_rate"
            else (c.name, pa.string() if c.name == "topic" else pa.float64())
            for c in TOPIC_WINDOWS.columns
        ]
    )
    full = [{c.name: row.get(c.name) for c in TOPIC_WINDOWS.columns} for row in rows]
    return pa.Table.from_pylist(full, schema=schema)


def _lost_rows(rows: list[dict[str, object]]) -> pa.Table:
    full = [{c.name: row.get(c.name) for c in LOST.columns} for row in rows]
    schema = pa.schema(
        [
            (c.name, pa.int64() if c.sql_type in ("BIGINT", "INTEGER") else pa.string())
            for c in LOST.columns
            if c.name != "timestamp"
        ]
        + [("timestamp", pa.timestamp("us", tz="UTC"))]
    )
    return pa.Table.from_pylist(full, schema=schema)


def test_the_producer_stage_and_the_end_to_end_semantic() -> None:
    config = _config(
        _pipeline("copy", ("orders",), ("orders-copy",)),
        _pipeline("load", ("orders-copy",), ("orders-loaded",)),
    )
    window = datetime(2026, 1, 1, tzinfo=UTC)
    topics = _topic_rows(
        [
            # The producer retried: 3 extra copies among 100 ids; a window row is not a total.
            {"topic": "orders", "records": 103, "distinct_ids": 100, "duplicate_copies": 3},
            {"topic": "orders", "window_start": window, "records": 50, "duplicate_copies": 9},
            {"topic": "orders-copy", "records": 103, "distinct_ids": 100, "duplicate_copies": 3},
        ]
    )
    lost = _lost_rows(
        [
            {"pipeline": "copy", "cause": LossCause.SEQUENCE_GAP.value, "missing": 4},
            {"pipeline": "copy", "cause": LossCause.NOT_IN_SINK.value, "missing": 1},
        ]
    )
    verdicts = [
        {"pipeline": "copy", "achieved": EO.value},
        {"pipeline": "load", "achieved": EO.value},
    ]
    rows = {r["pipeline"]: r for r in pipeline_stages(config, verdicts, topics, lost)}
    assert set(rows["copy"]) == set(PIPELINE_STAGES.names)
    copy, load = rows["copy"], rows["load"]
    assert copy["first_sources"] == ["orders"] == load["first_sources"]
    assert copy["producer_records"] == 103
    assert copy["producer_duplicate_copies"] == 3
    assert copy["producer_duplicate_rate"] == pytest.approx(0.03)
    # Gaps are the producer's: 4 missing records, the not-in-sink loss is the pipeline's.
    assert copy["producer_sequence_gaps"] == 4
    # Duplicates and gaps in the producer's own output: no guarantee, whatever the copy did.
    assert copy["producer_achieved"] == NG.value
    assert copy["end_to_end_achieved"] == NG.value
    assert load["chain"] == ["copy", "load"]
    assert load["end_to_end_achieved"] == NG.value


def test_a_clean_producer_leaves_the_pipelines_semantic() -> None:
    config = _config(_pipeline("copy", ("orders",), ("orders-copy",)))
    topics = _topic_rows([{"topic": "orders", "records": 10, "distinct_ids": 10}])
    verdicts = [{"pipeline": "copy", "achieved": ALO.value}]
    (row,) = pipeline_stages(config, verdicts, topics, _lost_rows([]))
    assert row["producer_achieved"] == EO.value
    assert row["end_to_end_achieved"] == ALO.value
    assert row["producer_duplicate_rate"] == 0


def test_nothing_in_the_source_yet_is_no_evidence() -> None:
    config = _config(_pipeline("copy", ("orders",), ("orders-copy",)))
    verdicts = [{"pipeline": "copy", "achieved": EO.value}]
    (row,) = pipeline_stages(config, verdicts, _topic_rows([]), _lost_rows([]))
    assert row["producer_records"] == 0
    assert row["producer_duplicate_rate"] is None
    assert row["producer_achieved"] == IE.value
    assert row["end_to_end_achieved"] == IE.value


def test_sources_without_producer_sessions_leave_their_gaps_unmeasured() -> None:
    config = _config(_pipeline("copy", ("orders",), ("orders-copy",)))
    topics = _topic_rows([{"topic": "orders", "records": 10, "distinct_ids": 10}])
    verdicts = [{"pipeline": "copy", "achieved": ALO.value}]
    (row,) = pipeline_stages(config, verdicts, topics, _lost_rows([]), sequenced={"elsewhere"})
    assert row["producer_sequence_gaps"] is None
    (row,) = pipeline_stages(config, verdicts, topics, _lost_rows([]), sequenced={"orders"})
    assert row["producer_sequence_gaps"] == 0
