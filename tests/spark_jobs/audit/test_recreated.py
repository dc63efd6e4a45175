"""Which topics were recreated: pure rules (the real-broker test is
tests/scenarios/test_recreated_topic.py)."""

from __future__ import annotations

from spark_jobs.audit.recreated import recreated_topics


def test_only_a_known_id_that_changed_is_a_recreation() -> None:
    recorded = {"a": "1", "b": "2", "c": "3"}
    current = {"a": "1", "b": "7", "d": "4", "c": ""}
    assert recreated_topics(recorded, current) == {"b": ("2", "7")}
