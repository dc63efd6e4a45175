"""Share groups asked beside the cycle (collectors/share_sampler.py), on the session broker
after the share-group runs: the broker sometimes takes about 2 s to answer
DescribeShareGroupOffsets, which must not stretch a cycle past its interval, and a share
group answered late must keep its place among the groups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from collectors.clients import Clients
from collectors.cycle import Collector
from dgm.config.collectors import CollectorSettings
from dgm.contracts.samples import SampleStore
from dgm.contracts.vocabulary import GroupType
from tests.support.share_group_run import ShareGroupRuns

INTERVAL_S = 1.0
CYCLES = 5


def share_collector(kafka: Any, state_dir: Path, topics: list[str]) -> Collector:
    include = tuple(f"^{t}$" for t in topics)
    settings = CollectorSettings(interval_s=INTERVAL_S, include_topics=include)
    clients = Clients(kafka.client_config(), request_timeout_s=10)
    return Collector(clients, settings, SampleStore(state_dir), request_timeout_s=10)


@pytest.mark.integration
def test_cycles_keep_their_interval_and_their_share_groups(
    kafka: Any, share_group_runs: ShareGroupRuns, tmp_path: Path
) -> None:
    runs = (share_group_runs.redelivering, share_group_runs.losing)
    groups = {r.group for r in runs}
    collector = share_collector(kafka, tmp_path, [r.source_topic for r in runs])
    try:
        summaries = []
        for n in range(CYCLES):
            summary = collector.cycle()
            assert summary is not None
            summaries.append(summary)
            # The first cycle waits for the first answer; every cycle knows the groups,
            # answered this cycle or carried from the last answer.
            assert groups <= collector.groups.keys(), n
            assert all(not collector.groups[g].members for g in groups)  # the runs ended
        # A cycle waits for the share answer until its interval is up, no longer; then come
        # the transactions and the writes, which take milliseconds here.
        assert max(s.seconds for s in summaries[1:]) < INTERVAL_S + 0.8, summaries
    finally:
        collector.clients.close()

    offsets = SampleStore(tmp_path).read("group_offsets").to_pylist()
    own = [r for r in offsets if r["group_id"] in groups]
    assert {r["group_type"] for r in own} == {GroupType.SHARE}
    answered = {r["sampled_at"] for r in own}
    # The first cycle's answer was waited for; later ones came in time or were left out.
    first = min(r["sampled_at"] for r in offsets)
    assert first in answered and len(answered) <= CYCLES
    for row in own:  # a start offset only grows: what a late answer claims is still claimed
        assert row["lag_from_hw"] >= 0
