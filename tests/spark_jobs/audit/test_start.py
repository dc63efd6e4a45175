"""analysis.start: where the first audit of a partition starts (pure part; the Kafka lookup
is exercised by test_audit_start.py on a real broker)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from dgm.contracts.samples import Key, PartitionOffsets
from spark_jobs.audit.start import first_starts

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
SAMPLED = [PartitionOffsets("t", 0, 0, 100, 90), PartitionOffsets("t", 1, 5, 50, 50)]


def no_lookup(times: Mapping[Key, int]) -> dict[Key, int]:
    raise AssertionError(f"no lookup expected, got {times}")


def test_earliest_gives_no_first_start() -> None:
    assert first_starts("earliest", SAMPLED, {}, NOW, no_lookup) == {}


def test_latest_starts_never_audited_partitions_at_their_sampled_lso() -> None:
    assert first_starts("latest", SAMPLED, {("t", 1): 20}, NOW, no_lookup) == {("t", 0): 90}


def test_a_duration_asks_kafka_for_the_first_offset_that_recent() -> None:
    asked: list[Mapping[Key, int]] = []

    def lookup(times: Mapping[Key, int]) -> dict[Key, int]:
        asked.append(times)
        return {("t", 0): 42, ("t", 1): -1}  # -1: no record that recent

    found = first_starts("1h", SAMPLED, {}, NOW, lookup)
    since_ms = int((NOW - timedelta(hours=1)).timestamp() * 1000)
    assert asked == [{("t", 0): since_ms, ("t", 1): since_ms}]
    assert found == {("t", 0): 42, ("t", 1): 50}
