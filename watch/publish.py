"""The watch's file (dgm.contracts.watched): written whole at every publication, and read back at
start so the duplicates seen before a restart stay published."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dgm.contracts.watched import SEEN_DUPLICATES, WatchStatus, read_watch, watch_path, with_status
from dgm.util.durable import replace_whole


def publish(state_dir: Path, seen: Sequence[Mapping[str, Any]], status: WatchStatus) -> Path:
    """Replace `<state_dir>/watch.parquet` with `seen` (SEEN_DUPLICATES rows) and `status`."""
    names = SEEN_DUPLICATES.names
    rows = [{name: row.get(name) for name in names} for row in seen]
    table = with_status(pa.Table.from_pylist(rows, SEEN_DUPLICATES), status)
    return replace_whole(watch_path(state_dir), lambda temp: pq.write_table(table, temp))


def published_seen(state_dir: Path) -> list[dict[str, Any]]:
    """The seen duplicates of the watch's last file; none when there is none (or it cannot be
    read: the watch then starts afresh, and the analysis still finds them)."""
    found = read_watch(state_dir)
    return [] if found is None else found[0].to_pylist()
