"""Fingerprint rows of one topic at a given time, and its id rules: what the fingerprint
store's tests write, compact and merge."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dgm.config.pipelines import MessageIdRule
from spark_jobs.schemas import FINGERPRINT

NOW = datetime(2026, 3, 1, tzinfo=UTC)
RULES = {"t": MessageIdRule()}


def rows(spark: Any, topic: str, offsets: range, at: datetime) -> Any:
    head = ("topic", "partition", "offset", "timestamp", "message_id", "committed")
    data = [dict(zip(head, (topic, 0, o, at, f"id-{o}", True), strict=True)) for o in offsets]
    # Every other column null: by name, so a column added to the schema needs no change here.
    names = [f.name for f in FINGERPRINT.fields]
    return spark.createDataFrame([[d.get(n) for n in names] for d in data], FINGERPRINT)
