"""Faults: the collectors' events attributed to the pipelines they weigh for."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from collectors.events import backwards_events
from dgm.config.loader import load_config
from dgm.contracts.registered_schemas import SCHEMA_LOOKUP_FAILED, SCHEMA_LOOKUP_RESTORED
from dgm.contracts.sample_schemas import SCHEMAS
from dgm.contracts.samples import PartitionOffsets, rows_table
from spark_jobs.analyze.faults import faults
from spark_jobs.audit.schema_events import failed_line, restored_line

AT = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_partition_going_back_is_a_fault_of_the_pipelines_of_its_topic(tmp_path: Path) -> None:
    config_file = tmp_path / "dgm.toml"
    config_file.write_text(
        f'state_dir = "{tmp_path}"\n'
        '[[pipelines]]\nname = "reads"\nsource_topics = ["orders"]\nsink_topics = ["out"]\n'
        'consumer_group = "g"\ndeclared_semantic = "at-least-once"\n'
        '[[pipelines]]\nname = "elsewhere"\nsource_topics = ["x"]\nsink_topics = ["y"]\n'
        'consumer_group = "h"\ndeclared_semantic = "at-least-once"\n'
    )
    before = {("orders", 0): PartitionOffsets("orders", 0, 0, 150, 150, leader_epoch=0)}
    now = [PartitionOffsets("orders", 0, 0, 100, 100, leader_epoch=1)]
    events = rows_table("events", backwards_events(before, now, AT, "c"))
    found = faults(load_config(config_file), events, SCHEMAS["producers"].empty_table())
    assert [(r["event"], r["pipeline"]) for r in found.to_pylist()] == [
        ("high_watermark_backwards", "reads"),
        ("lso_backwards", "reads"),
    ]
    assert isinstance(found, pa.Table)


def test_a_schema_the_audit_could_not_fetch_is_shown_with_the_pipelines_of_its_topic(
    tmp_path: Path,
) -> None:
    config_file = tmp_path / "dgm.toml"
    config_file.write_text(
        f'state_dir = "{tmp_path}"\n'
        '[[pipelines]]\nname = "reads"\nsource_topics = ["orders"]\nsink_topics = ["out"]\n'
        'consumer_group = "g"\ndeclared_semantic = "at-least-once"\n'
    )
    subject = ("orders", "content", 7)
    rows = [
        {"sampled_at": AT, "cluster_id": "c", "event": SCHEMA_LOOKUP_FAILED,
         "detail": failed_line(subject, "default", "not found"), "topic": "orders"},
        {"sampled_at": AT, "cluster_id": "c", "event": SCHEMA_LOOKUP_RESTORED,
         "detail": restored_line(subject, "default"), "topic": "orders"},
    ]  # fmt: skip
    found = faults(
        load_config(config_file), rows_table("events", rows), SCHEMAS["producers"].empty_table()
    )
    assert [(r["event"], r["pipeline"]) for r in found.to_pylist()] == [
        (SCHEMA_LOOKUP_FAILED, "reads"),
        (SCHEMA_LOOKUP_RESTORED, "reads"),
    ]
