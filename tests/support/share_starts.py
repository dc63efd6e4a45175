"""The share-partition start offsets the collectors last sampled for a share group: what its
pipeline claims under the group claim (collectors/share_groups.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dgm.contracts.samples import SampleStore


def newest_share_rows(state_dir: Path, group: str) -> dict[tuple[str, int], dict[str, Any]]:
    """(topic, partition) -> the newest group_offsets row of `group`."""
    newest: dict[tuple[str, int], dict[str, Any]] = {}
    for r in SampleStore(state_dir).read("group_offsets").to_pylist():
        if r["group_id"] != group:
            continue
        key = (r["topic"], r["partition"])
        if key not in newest or r["sampled_at"] >= newest[key]["sampled_at"]:
            newest[key] = r
    return newest


def newest_start_offsets(state_dir: Path, group: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the newest sampled start offset of `group`."""
    return {key: r["committed_offset"] for key, r in newest_share_rows(state_dir, group).items()}
