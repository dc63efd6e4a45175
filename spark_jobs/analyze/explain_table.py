"""The published duplicates with their causes explained (explain.py) from the samples and
the copies' batch headers: the glue between the Arrow tables and explain's pandas rules."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from dgm.config.document import DgmConfig
from dgm.contracts import published as tables
from dgm.contracts.vocabulary import DuplicateCause
from spark_jobs.analyze.copy_batches import CopyBatches
from spark_jobs.analyze.explain import explained, group_timeline
from spark_jobs.analyze.publish import conform_arrow

_SAMPLED = {
    "events": ["sampled_at", "event", "group_id", "detail"],
    "group_offsets": ["sampled_at", "group_id", "topic", "partition", "committed_offset"],
    "offsets": ["sampled_at", "topic", "partition", "lso"],
}


def explained_duplicates(
    config: DgmConfig, duplicates: pa.Table, samples: Mapping[str, pa.Table], batches: CopyBatches
) -> pa.Table:
    """`duplicates` (the published table) with every copy's producer session and arrival,
    and the causes the dgm headers left unknown explained where the evidence decides."""
    if duplicates.num_rows == 0:
        return duplicates
    rows = duplicates.to_pandas()
    unknown = rows[rows["cause"] == DuplicateCause.UNKNOWN.value]
    found = batches.of(unknown)
    sampled = {
        kind: samples[kind].select(columns).to_pandas() for kind, columns in _SAMPLED.items()
    }
    timeline = group_timeline(sampled["events"], sampled["group_offsets"])
    groups = {p.name: p.consumer_group for p in config.pipelines if p.consumer_group}
    done = explained(
        rows, found, timeline, sampled["offsets"], groups, config.collectors.interval_s
    )
    return conform_arrow(pa.Table.from_pandas(done, preserve_index=False), tables.DUPLICATES)
