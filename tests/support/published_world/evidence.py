"""The evidence rows of the hand-made publication: duplicated ids with their copies, lost
records, records out of order, and payments-ledger's truncation."""

from __future__ import annotations

from tests.support.published_world.shape import (
    INCONSISTENT,
    TRUNCATED,
    TRUNCATED_TOPIC,
    TRUNCATED_WINDOW,
    WINDOW_S,
    WINDOWS,
    Row,
)


def _copy(
    pipeline: str, topic: str, mid: str, cause: str, copies: list[tuple[int, int, int, int]]
) -> list[Row]:
    """Rows of one duplicated id; copies are (partition, offset, seconds ago, seq)."""
    rows = []
    for number, (partition, offset, ago, seq) in enumerate(copies, start=1):
        producer = "proc-a" if cause != "reprocessing" or number == 1 else "proc-b"
        rows.append(
            {
                "pipeline": pipeline,
                "topic": topic,
                "message_id": mid,
                "copies": len(copies),
                "copy_number": number,
                "is_extra_copy": number > 1,
                "partition": partition,
                "offset": offset,
                "timestamp": ago,
                "key": f"key-{mid}",
                "producer": producer,
                "seq": seq,
                "lineage": f"{topic.split('-')[0]}/{partition}/{offset // 2}",
                "cause": cause,
            }
        )
    return rows


def duplicates() -> list[Row]:
    return [
        *_copy(
            "orders-alo",
            "orders-enriched",
            "ord-0012",
            "reprocessing",
            [(0, 120, 500, 12), (0, 131, 480, 3)],
        ),
        *_copy(
            "orders-alo",
            "orders-enriched",
            "ord-0077",
            "reprocessing",
            [(2, 402, 300, 77), (2, 415, 290, 9)],
        ),
        *_copy(
            "payments-eos",
            "payments-ledger",
            "pay-0007",
            "reprocessing",
            [(0, 14, 540, 7), (0, 29, 530, 2)],
        ),
        *_copy(
            "payments-eos",
            "payments-ledger",
            "pay-0042",
            "reprocessing",
            [(1, 60, 420, 42), (1, 71, 410, 5), (1, 88, 400, 11)],
        ),
        *_copy(
            "payments-eos",
            "payments-ledger",
            "pay-0100",
            "producer retry",
            [(0, 150, 200, 100), (0, 151, 199, 100)],
        ),
    ]


def late_records() -> list[Row]:
    """orders-alo's two late records (its verdict counts them), the slower listed second."""
    base = {"pipeline": "orders-alo", "topic": "orders", "partition": 0, "measured_by": "arrivals"}
    return [
        {**base, "message_id": "ord-0042", "offset": 42, "timestamp": 500, "delay_s": 12.5,
         "first_copy": "orders-enriched/1/40"},
        {**base, "message_id": "ord-0043", "offset": 43, "timestamp": 499, "delay_s": 31.0,
         "first_copy": "orders-enriched/0/44"},
    ]  # fmt: skip


def lost() -> list[Row]:
    base = {"pipeline": "payments-eos", "topic": "payments", "missing": 1}
    cause = "not in sink (below the committed offset, past the grace period)"
    return [
        {
            **base,
            "message_id": "pay-0311",
            "partition": 0,
            "offset": 311,
            "timestamp": 350,
            "producer": "src-1",
            "seq": 311,
            "cause": cause,
        },
        {
            **base,
            "message_id": "pay-0312",
            "partition": 1,
            "offset": 156,
            "timestamp": 349,
            "producer": "src-1",
            "seq": 312,
            "cause": "torn commit",
            "aborted_copy": "payments-ledger/1/77",
        },
        {
            **base,
            "message_id": None,
            "partition": 1,
            "offset": None,
            "timestamp": None,
            "producer": "src-1",
            "seq": 400,
            "missing": 3,
            "cause": "sequence gap",
        },
    ]


def out_of_order() -> list[Row]:
    """payments' producer session src-1 wrote two records after a higher dgm-seq (a retried
    request); the payments-eos sink holds one copy behind a later offset of payments/1."""
    producer: Row = {"anomaly": "out of order", "pipeline": None, "topic": "payments"}
    producer |= {"partition": 0, "stream": "src-1", "preceded_by": 204, "preceded_at": 204}
    return [
        {**producer, "offset": 205, "timestamp": 230, "message_id": "pay-0201", "position": 201},
        {**producer, "offset": 206, "timestamp": 229, "message_id": "pay-0202", "position": 202},
        {
            "anomaly": "sink out of order",
            "pipeline": "payments-eos",
            "topic": "payments-ledger",
            "partition": 1,
            "offset": 90,
            "timestamp": 228,
            "message_id": "pay-0150",
            "stream": "payments/1",
            "position": 150,
            "preceded_by": 152,
            "preceded_at": 88,
        },
    ]


def truncations(topic: str, counted: bool) -> Row:
    mine = counted and topic == TRUNCATED_TOPIC
    return {
        "truncated_records": TRUNCATED if mine else 0,
        "inconsistent_offsets": INCONSISTENT if mine else 0,
    }


def log_anomalies() -> list[Row]:
    """payments-ledger[0] truncated at offset 120: two records gone, 120 holds another now."""
    at = (WINDOWS - TRUNCATED_WINDOW) * WINDOW_S - 10
    base = {"topic": TRUNCATED_TOPIC, "partition": 0, "timestamp": at, "detected_at": 30}
    base |= {"producer": "proc-a", "key": None}
    truncated = [
        {**base, "anomaly": "truncated record", "jepsen": "lost-write", "offset": 120 + n}
        | {"message_id": f"pay-{900 + n}", "seq": 900 + n}
        | {"now_message_id": "pay-950" if n == 0 else None}
        for n in range(TRUNCATED)
    ]
    inconsistent = [
        {**row, "anomaly": "inconsistent offset", "jepsen": "inconsistent-offsets"}
        for row in truncated
        if row["now_message_id"] is not None
    ]
    return truncated + inconsistent
