"""The audit headers of the design guide, and the lineage header's `topic/partition/offset`."""

from __future__ import annotations

ID, PRODUCER, SEQ, SRC = "dgm-id", "dgm-producer", "dgm-seq", "dgm-src"


def format_src(topic: str, partition: int, offset: int) -> str:
    return f"{topic}/{partition}/{offset}"


def parse_src(value: bytes | str) -> tuple[str, int, int]:
    """`topic/partition/offset` back into its parts; ValueError if it is not one."""
    text = value.decode() if isinstance(value, bytes) else value
    # Split from the right: the last two parts are numbers, everything before is the topic.
    parts = text.rsplit("/", 2)
    if len(parts) != 3 or not parts[0]:
        raise ValueError(f"{SRC} header {text!r} is not topic/partition/offset")
    topic, partition, offset = parts
    if not (partition.isdigit() and offset.isdigit()):
        raise ValueError(f"{SRC} header {text!r}: partition and offset must be non-negative ints")
    return topic, int(partition), int(offset)


def header_map(headers: list[tuple[str, bytes | None]] | None) -> dict[str, bytes]:
    """A record's headers as a dict; a repeated key keeps its last value, a null value is
    skipped (Kafka allows both; neither carries an audit value)."""
    result: dict[str, bytes] = {}
    for key, value in headers or []:
        if value is not None:
            result[key] = value
    return result
