"""The share-group sampler against the session's share-group runs (tests/support/
share_group_run.py): the collectors sampled each relay's share group while it ran and after,
through ShareGroupDescribe and DescribeShareGroupOffsets on the real broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dgm.contracts.samples import SampleStore
from dgm.contracts.vocabulary import GroupType
from lab.share_group import acknowledged
from tests.support.share_group_run import ShareGroupRuns
from tests.support.share_starts import newest_share_rows, newest_start_offsets
from tests.support.truth import read_records


@pytest.mark.integration
def test_share_groups_are_sampled_with_members_and_start_offsets(
    kafka: Any, share_group_runs: ShareGroupRuns
) -> None:
    state_dir = share_group_runs.state_dir
    members = SampleStore(state_dir).read("group_members").to_pylist()
    offsets = SampleStore(state_dir).read("group_offsets").to_pylist()
    for report in (share_group_runs.redelivering, share_group_runs.losing):
        own = [r for r in members if r["group_id"] == report.group]
        assert own and {r["group_type"] for r in own} == {GroupType.SHARE}
        # While a relay ran, its members held the source's partitions.
        assigned = {(a["topic"], a["partition"]) for r in own for a in (r["assignment"] or [])}
        ends: dict[int, int] = {}
        for record in read_records(kafka.bootstrap_servers, report.source_topic):
            ends[record.partition] = max(ends.get(record.partition, 0), record.offset + 1)
        assert assigned == {(report.source_topic, p) for p in ends}
        assert {r["group_type"] for r in offsets if r["group_id"] == report.group} == {
            GroupType.SHARE
        }
        # Every record below a start offset was acknowledged, by the relays' transcripts
        # (the broker took it); the offsets moved, and never past the log's end. They may
        # trail it: the broker moves them when it next acquires records.
        acked = acknowledged(Path(report.run_dir) / "logs")
        starts = newest_start_offsets(state_dir, report.group)
        assert {p for _, p in starts} == set(ends)
        for (_, partition), start in starts.items():
            assert 0 < start <= ends[partition]
            assert set(range(start)) <= acked[partition]
        # The broker's share-partition lag (KIP-1226, DescribeShareGroupOffsets v1): the
        # records from the start offset to the end not acknowledged, by the transcripts. The
        # records the trailing start offset leaves above it were acknowledged: lag 0 there,
        # where lag_from_hw counts them.
        for (_, partition), row in newest_share_rows(state_dir, report.group).items():
            above = range(row["committed_offset"], row["high_watermark"])
            print(f"{report.group}[{partition}]: start {row['committed_offset']}, end "
                  f"{row['high_watermark']}, share lag {row['share_lag']}")  # fmt: skip
            assert row["share_lag"] == len(set(above) - acked[partition]), row
