from __future__ import annotations

import pyarrow as pa

from dgm.contracts.sample_schemas import SCHEMAS


def test_every_kind_starts_with_when_and_which_cluster() -> None:
    for kind, schema in SCHEMAS.items():
        assert schema.names[:2] == ["sampled_at", "cluster_id"], kind
        assert schema.field("sampled_at").type == pa.timestamp("ms", tz="UTC"), kind
        assert not schema.field("sampled_at").nullable and not schema.field("cluster_id").nullable


def test_every_column_is_documented() -> None:
    for kind, schema in SCHEMAS.items():
        for field in schema:
            assert field.metadata and field.metadata[b"doc"].strip(), f"{kind}.{field.name}"


def test_required_kinds() -> None:
    assert set(SCHEMAS) == {
        "offsets",
        "group_offsets",
        "group_members",
        "producers",
        "transactions",
        "events",
    }
