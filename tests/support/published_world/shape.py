"""The hand-made publication's shape: its topics, its windows, its sampled pipeline, and the
one truncation (tests/support/published_world/publish.py builds the file)."""

from __future__ import annotations

from typing import Any

WINDOW_S = 60
WINDOWS = 10
# payments-eos's sink: truncated records and inconsistent offsets, in one window.
TRUNCATED_TOPIC = "payments-ledger"
TRUNCATED, INCONSISTENT, TRUNCATED_WINDOW = 2, 1, 3
SAMPLE_EVERY_S = 30

Row = dict[str, Any]

# topic -> partitions
TOPICS = {
    "orders": 3,
    "orders-enriched": 3,
    "payments": 2,
    "payments-ledger": 2,
    "audit-in": 1,
    "audit-out": 1,
}


# orders-alo keeps 1 in 10 message ids (docs/design.md, "Sampled pipelines").
SAMPLED = {"orders-alo": 10}


def within_window(rows: list[Row], start: int) -> list[Row]:
    return [r for r in rows if start - WINDOW_S < r["timestamp"] <= start]
