"""Read-only queries over the watch's file (dgm/watched.py): the duplicates it has seen that
no analysis has published yet. Small and replaced every few seconds, so read uncached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from dashboard.queries import config, database_path
from dgm.published import open_read_only
from dgm.watched import watch_path

SHOWN = 200

_NOT_ANALYSED = """
SELECT s.pipeline, s.topic, s.message_id, s.partition, s."offset", s."timestamp",
       s.first_partition, s.first_offset, s.first_timestamp, s.producer, s.seq, s.lineage,
       s.seen_at
FROM seen_duplicates s
WHERE NOT EXISTS (
    SELECT 1 FROM {published} d
    WHERE d.is_extra_copy AND d.pipeline = s.pipeline AND d.topic = s.topic
      AND d.partition = s.partition AND d."offset" = s."offset")
ORDER BY s.seen_at DESC
"""


def _quoted(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def seen_not_analysed() -> tuple[dict[str, Any] | None, pd.DataFrame, int]:
    """(the watch's status row, the newest SHOWN seen duplicates no analysis has published,
    how many there are); (None, empty, 0) without a readable watch file."""
    try:
        with open_read_only(watch_path(config().state_dir)) as db:
            db.execute("SET TimeZone = 'UTC'")
            status = db.sql("SELECT * FROM watch_status").to_arrow_table().to_pylist()
            published = database_path()
            if published.exists():
                db.execute(f"ATTACH {_quoted(published)} AS analysis (READ_ONLY)")
                query = _NOT_ANALYSED.format(published="analysis.duplicates")
            else:
                query = _NOT_ANALYSED.format(published="(SELECT * FROM seen_duplicates LIMIT 0)")
                query = query.replace("d.is_extra_copy AND ", "")
            rows = db.sql(query).to_arrow_table().to_pandas()
    except (FileNotFoundError, duckdb.Error):
        return None, pd.DataFrame(), 0
    return (status[0] if status else None), rows.head(SHOWN), len(rows)
