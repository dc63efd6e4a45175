"""The audit headers of the design guide, and the lineage header's `topic/partition/offset`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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


Headers = Sequence[tuple[str, str | bytes | None]] | Mapping[str, str | bytes | None] | None


def header_map(headers: Headers) -> dict[str, bytes]:
    """A record's headers as a dict; a repeated key keeps its last value, a null value is
    skipped (Kafka allows both; neither carries an audit value). Takes whatever
    confluent-kafka's `Message.headers()` is typed to return."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers or []
    result: dict[str, bytes] = {}
    for key, value in pairs:
        if value is not None:
            result[key] = value.encode() if isinstance(value, str) else value
    return result
