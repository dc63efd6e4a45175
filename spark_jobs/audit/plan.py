"""Which offset ranges this cycle audits: each partition from where its audit ends (or
starts: start.py) to its sampled LSO (ranges.plan_ranges)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime

from dgm.config.document import DgmConfig
from dgm.contracts.samples import Key, PartitionOffsets
from spark_jobs.audit.cluster_sources import KafkaSources
from spark_jobs.audit.ranges import OffsetRange, plan_ranges
from spark_jobs.audit.start import first_starts


def planned_ranges(
    config: DgmConfig,
    sources: KafkaSources,
    sampled: Sequence[PartitionOffsets],
    audited: Mapping[Key, int],
    recreated: Collection[str],
    rejudged: Mapping[Key, int],
    now: datetime | None = None,
) -> list[OffsetRange]:
    """The ranges to audit from the `audited` positions. A `recreated` topic is audited from
    its start, whatever analysis.start says; a topic `rejudged` for a changed predicate from
    where its audit began."""
    starts = first_starts(
        config.analysis.start,
        sampled,
        audited,
        now or datetime.now(UTC),
        sources.offsets_for_times(),
    )
    starts = {
        k: v
        for k, v in starts.items()
        if k[0] not in recreated and k[0] not in {t for t, _ in rejudged}
    } | dict(rejudged)
    return plan_ranges(sampled, audited, starts)
