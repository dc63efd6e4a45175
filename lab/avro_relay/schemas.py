"""The order schemas the re-serializing relay reads and writes: v2 adds a field with a default
(a compatible evolution), so every re-serialized record's bytes differ from its source's."""

from __future__ import annotations

import json
import zlib

ORDER_V1 = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "lab.avro",
        "fields": [
            {"name": "order_id", "type": "string"},
            {"name": "amount", "type": "double"},
            {"name": "note", "type": ["null", "string"], "default": None},
        ],
    }
)
ORDER_V2 = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "lab.avro",
        "fields": [
            {"name": "order_id", "type": "string"},
            {"name": "amount", "type": "double"},
            {"name": "note", "type": ["null", "string"], "default": None},
            {"name": "region", "type": "string", "default": "unknown"},
        ],
    }
)
ID_FIELD = "order_id"


def order(n: int) -> dict[str, object]:
    """The n-th source record (v1): its id is the only thing the pipeline must keep."""
    return {"order_id": f"order-{n:06d}", "amount": n * 0.25, "note": None if n % 3 else "gift"}


def enriched(record: dict[str, object]) -> dict[str, object]:
    """What the relay writes for a v1 record (v2)."""
    return {**record, "region": "eu" if zlib.crc32(str(record["order_id"]).encode()) % 2 else "us"}
