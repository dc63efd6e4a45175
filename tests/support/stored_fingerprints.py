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
    data = [
        (topic, 0, o, at, f"id-{o}", None, None, None, None, None, None, None, True, None, None)
        for o in offsets
    ]
    return spark.createDataFrame(data, FINGERPRINT)
