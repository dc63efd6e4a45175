"""The share-partition start offsets the collectors last sampled for a share group: what its
pipeline claims under the group claim (collectors/share_groups.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dgm.contracts.samples import SampleStore


def newest_start_offsets(state_dir: Path, group: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the newest sampled start offset of `group`."""
    newest: dict[tuple[str, int], tuple[Any, int]] = {}
    for r in SampleStore(state_dir).read("group_offsets").to_pylist():
        if r["group_id"] != group:
            continue
        key = (r["topic"], r["partition"])
        if key not in newest or r["sampled_at"] >= newest[key][0]:
            newest[key] = (r["sampled_at"], r["committed_offset"])
    return {key: offset for key, (_, offset) in newest.items()}
