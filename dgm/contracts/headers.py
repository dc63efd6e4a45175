"""The audit headers of the design guide, and the lineage header's `topic/partition/offset`
(the rules that read them: dgm/contracts/message_ids.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dgm.contracts.message_ids import src_parts

ID, PRODUCER, SEQ, SRC = "dgm-id", "dgm-producer", "dgm-seq", "dgm-src"


def format_src(topic: str, partition: int, offset: int) -> str:
    return f"{topic}/{partition}/{offset}"


def parse_src(value: bytes | str) -> tuple[str, int, int]:
    """`topic/partition/offset` back into its parts, as the audit reads them (message_ids.
    SRC_PATTERN); ValueError if it is not one."""
    text = value.decode() if isinstance(value, bytes) else value
    parts = src_parts(text)
    if parts is None:
        raise ValueError(f"{SRC} header {text!r} is not topic/partition/offset")
    return parts


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
