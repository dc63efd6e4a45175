"""Read-only queries over the watch's file (dgm/contracts/watched.py): the duplicates it has
seen that no analysis has published yet. Small and replaced every few seconds, so read uncached."""

from __future__ import annotations

import duckdb
import pandas as pd

from dashboard.queries import config, database_path
from dgm.contracts.published import open_read_only
from dgm.contracts.watched import WatchStatus, read_watch

SHOWN = 200

_NOT_ANALYSED = """
SELECT s.pipeline, s.topic, s.message_id, s.partition, s."offset", s."timestamp",
       s.first_partition, s.first_offset, s.first_timestamp, s.producer, s.seq, s.lineage,
       s.seen_at
FROM seen s
WHERE NOT EXISTS (
    SELECT 1 FROM duplicates d
    WHERE d.is_extra_copy AND d.pipeline = s.pipeline AND d.topic = s.topic
      AND d.partition = s.partition AND d."offset" = s."offset")
ORDER BY s.seen_at DESC
"""


def seen_not_analysed() -> tuple[WatchStatus | None, pd.DataFrame, dict[str, int]]:
    """(the watch's status, the newest SHOWN seen duplicates no analysis has published, how
    many there are per pipeline); (None, empty, {}) without a readable watch file."""
    state_dir = config().state_dir
    found = read_watch(state_dir)
    if found is None:
        return None, pd.DataFrame(), {}
    seen, status = found
    if seen.num_rows == 0:
        return status, pd.DataFrame(), {}
    try:
        with open_read_only(database_path()) as db:
            db.execute("SET TimeZone = 'UTC'")
            db.register("seen", seen)
            rows = db.sql(_NOT_ANALYSED).to_arrow_table().to_pandas()
    except FileNotFoundError:  # no analysis published yet: every seen duplicate is new
        rows = seen.to_pandas().sort_values("seen_at", ascending=False)
    except duckdb.Error:
        return status, pd.DataFrame(), {}
    counts = rows["pipeline"].value_counts().to_dict() if len(rows) else {}
    return status, rows.head(SHOWN), {str(k): int(v) for k, v in counts.items()}
