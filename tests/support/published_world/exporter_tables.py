"""The hand-made publication with only the tables the exporter reads, timed on whole minutes:
what the exporter tests serve."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dgm.contracts import published
from tests.support.published_world import publish

# The tables the exporter reads; the builder's other tables (added to the contract later)
# are left out, so these tests do not depend on the builder knowing every table.
READ = {
    *("runs", "verdicts", "pipeline_windows", "topic_windows", "duplicates", "faults"),
    *("partition_offsets", "group_lag", "group_status", "transactions"),
}


def build(state_dir: Path, **options: Any) -> None:
    tables = tuple(t for t in published.TABLES if t.name in READ)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(publish, "TABLES", tables)
        publish.build(state_dir, **options)


def minute() -> datetime:
    """The current minute: the builder's windows start whole minutes before its `now`, so
    they fall on the analysis' windows (multiples of window_s), one being the last closed."""
    return datetime.now(UTC).replace(second=0, microsecond=0)
