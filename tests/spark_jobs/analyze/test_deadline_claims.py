"""Deadline claims outside Spark: the claim a verdict names, what makes the engine rebuild,
which records a moved deadline cutoff newly checks, and that a deadline pipeline's group
(kept for its faults) claims nothing."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from dgm.config.document import DgmConfig
from dgm.config.external_sinks import ExternalSink
from dgm.contracts.vocabulary import Claim
from spark_jobs.analyze import claims
from spark_jobs.analyze.context import Context
from spark_jobs.analyze.engine import deadline_reason
from spark_jobs.analyze.pipeline_metrics import claim_of
from tests.support.engine_run import pipeline

NOW = datetime(2026, 1, 1, tzinfo=UTC)
GROUP = pipeline("g")
DEADLINE = replace(pipeline("d", ("s2",)), claim="deadline", max_delay="5m")


def test_the_verdict_names_its_claim() -> None:
    assert claim_of(GROUP) == (Claim.GROUP_COMMITS, "group g")
    external = pipeline("x", external=True)
    assert claim_of(external) == (Claim.SINK_OFFSETS, "table tbl, group g")
    assert claim_of(DEADLINE) == (Claim.DEADLINE, "max_delay 5m")
    assert claim_of(replace(external, claim="deadline", max_delay="1h"))[0] is Claim.DEADLINE


def test_deadline_cutoffs_follow_now() -> None:
    config = DgmConfig(pipelines=(GROUP, DEADLINE))
    now_us = round(NOW.timestamp() * 1_000_000)
    assert claims.deadline_cutoffs(config, NOW) == {"d": (now_us - 300_000_000, 300_000_000)}


def test_a_deadline_pipelines_group_claims_nothing() -> None:
    config = DgmConfig(pipelines=(GROUP, DEADLINE))  # both name group "g"
    offsets = pa.table(
        {
            "sampled_at": pa.array([NOW], pa.timestamp("us", tz="UTC")),
            "group_id": ["g"],
            "topic": ["s"],
            "partition": pa.array([0], pa.int32()),
            "committed_offset": pa.array([7], pa.int64()),
        }
    )
    assert claims.latest_committed(offsets, config) == {("g", "s", 0): 7}
    claimed = claims.claimed_offsets(config, {("d", "s2", 0): 3, ("g", "s", 0): 7}, {})
    assert claimed == {("g", "s", 0): 7}
    with_table = replace(DEADLINE, external_sink=ExternalSink(Path("t.db"), "tbl", "id"))
    src = {("external:d:tbl", "s2", 0): 9}
    assert claims.claimed_offsets(DgmConfig(pipelines=(with_table,)), {}, src) == {}


def test_moved_deadlines_name_the_newly_checked_span() -> None:
    topics = {"d": ("s2", "s3")}
    assert claims.moved_deadlines({"d": (10, 5)}, {"d": (10, 5)}, topics) == []
    assert claims.moved_deadlines({"d": (10, 5)}, {"d": (25, 5)}, topics) == [
        ("s2", 10, 25),
        ("s3", 10, 25),
    ]


def test_a_changed_claim_or_max_delay_or_a_cutoff_moving_back_rebuilds() -> None:
    old = Context({}, {}, {}, {}, {}, deadlines={"d": (100, 5)})
    assert deadline_reason(old, replace(old, deadlines={"d": (120, 5)})) == ""
    assert deadline_reason(old, replace(old, deadlines={"d": (120, 6)})) == (
        "claims or max_delay changed"
    )
    assert deadline_reason(old, replace(old, deadlines={})) == "claims or max_delay changed"
    assert deadline_reason(replace(old, deadlines={}), old) == "claims or max_delay changed"
    assert deadline_reason(old, replace(old, deadlines={"d": (90, 5)})) == (
        "deadline cutoff moved back"
    )
