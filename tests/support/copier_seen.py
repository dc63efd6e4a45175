"""What dgm saw of a transactional copier run (lab/txn_copier): the producer ids and epochs in
its samples, the new producer sessions it told (`epoch_bump` events) and the faults the
analysis gave the pipeline, each told against the run's SIGKILLs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dgm.config.pipelines import PipelineConfig
from dgm.contracts.published import PUBLISHED_FILE
from lab.txn_copier.run import CopierLabReport
from tests.support.copier_truth import Sessions, spans


def copier_pipeline(name: str, report: CopierLabReport) -> PipelineConfig:
    """The copier run declared to dgm: exactly-once from its source to its sink."""
    return PipelineConfig(
        name=name,
        source_topics=(report.source_topic,),
        sink_topics=(report.sink_topic,),
        consumer_group=report.group,
        declared_semantic="exactly-once",
    )


def dgm_saw(state_dir: Path, pipeline: str, report: CopierLabReport) -> dict[str, Any]:
    """The copier's producer ids and epochs in dgm's samples, its epoch events and the faults
    the analysis attributed to the pipeline."""
    producers = _samples(state_dir, "producers")
    on_sink = producers.filter(pc.equal(producers["topic"], report.sink_topic))
    transactions = _samples(state_dir, "transactions")
    mine = transactions.filter(pc.equal(transactions["transactional_id"], report.transactional_id))
    events = _samples(state_dir, "events")
    # The copier's own: other transactional producers may share the cluster (the version
    # matrix runs the lab's exactly-once processor beside it).
    told_of = pc.starts_with(events["detail"], f"{report.transactional_id}: ")
    bumps = events.filter(pc.and_(pc.equal(events["event"], "epoch_bump"), told_of))
    with duckdb.connect(str(state_dir / PUBLISHED_FILE), read_only=True) as db:
        faults = db.execute(
            'SELECT event, detail FROM faults WHERE pipeline = ? ORDER BY "at"', [pipeline]
        ).fetchall()
    return {
        "producers": _epochs(on_sink),
        "transactions": _epochs(mine),
        "epoch_events": [
            f"{detail} ({_after_kill(at.timestamp(), report)})"
            for detail, at in zip(
                bumps["detail"].to_pylist(), bumps["sampled_at"].to_pylist(), strict=True
            )
        ],
        "epoch_bumps": [
            _since_kill(at.timestamp(), report) for at in bumps["sampled_at"].to_pylist()
        ],
        "faults": Counter(event for event, _ in faults),
        "fault_details": [detail for _, detail in faults],
    }


def _since_kill(at: float, report: CopierLabReport) -> float | None:
    """Seconds from the last SIGKILL before `at`; None when none came before."""
    before = [k["at"] for k in report.kills if k["at"] <= at]
    return at - max(before) if before else None


def _after_kill(at: float, report: CopierLabReport) -> str:
    """When an event was sampled, told from the SIGKILL before it."""
    before = [k["at"] for k in report.kills if k["at"] <= at]
    if not before:
        return "before any kill"
    return f"{at - max(before):.1f} s after kill {len(before)}"


def _epochs(rows: pa.Table) -> str:
    by_pid: dict[int, set[int]] = {}
    for pid, epoch in zip(
        rows["producer_id"].to_pylist(), rows["producer_epoch"].to_pylist(), strict=True
    ):
        by_pid.setdefault(int(pid), set()).add(int(epoch))
    return "; ".join(f"producer id {p}: epochs {spans(e)}" for p, e in sorted(by_pid.items()))


def _samples(state_dir: Path, kind: str) -> pa.Table:
    files = sorted((state_dir / "samples" / kind).glob("*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")


def assert_sessions_are_restarts(
    seen: dict[str, Any], sessions: Sessions, report: CopierLabReport, protocol: int, told: str
) -> None:
    """The new producer sessions dgm told (`seen`, dgm_saw's) are the copier's restarts, never
    one per transaction (docs/design.md, "Transactions V1 and V2"); `sessions` the sink's."""
    kills = len(report.kills)
    bumps = seen["epoch_bumps"]
    assert seen["faults"]["epoch_bump"] == len(bumps), told
    assert all(after is not None for after in bumps), told  # none before the first kill
    if protocol == 1:
        # A restart over an open transaction bumps twice (the fence, then the new session).
        assert kills <= len(bumps) <= 2 * kills, told
    else:
        # Every transaction its own epoch, one session per instance: a restart is its
        # InitProducerId (the coordinator's Empty state), when a sample catches it.
        epochs = max(max(e) for e in sessions.data.values())
        assert epochs >= report.transactions["committed"], told
        assert len(bumps) <= kills, told
