"""The verdict rows of the hand-made publication, per pipeline and per window, with the
topics' and partitions' windows and orders-alo's producer stage."""

from __future__ import annotations

from dgm.contracts.sampling import rate_interval
from tests.support.published_world.evidence import out_of_order, truncations
from tests.support.published_world.shape import (
    INCONSISTENT,
    SAMPLED,
    TOPICS,
    TRUNCATED,
    TRUNCATED_WINDOW,
    WINDOW_S,
    WINDOWS,
    Row,
    within_window,
)


def _with_intervals(row: Row) -> Row:
    """The row's sample and its rates' 95% intervals, as the analysis publishes them."""
    one_in = SAMPLED.get(row["pipeline"], 1)
    ids = row["distinct_ids"] if "distinct_ids" in row else row["records_checked"]  # a window
    dup = rate_interval(row["duplicate_copies"], ids, one_in)
    loss = rate_interval(row["lost"], row["records_checked"], one_in)
    return row | {
        "sample_one_in": one_in,
        "duplicate_rate_low": dup[0],
        "duplicate_rate_high": dup[1],
        "loss_rate_low": loss[0],
        "loss_rate_high": loss[1],
    }


# Delivery latency quantiles (bucket upper bounds, seconds) of every pipeline and window.
LATENCY: Row = {
    "latency_p50_s": 0.5,
    "latency_p95_s": 2.0,
    "latency_p99_s": 4.0,
    "latency_max_s": 8.0,
}


def verdicts() -> list[Row]:
    rows = [_with_intervals(row) for row in _exact_verdicts()]
    return [row | {"latency_measured": row["records_checked"]} for row in rows]


def _exact_verdicts() -> list[Row]:
    common: Row = {"unidentified": 0, "upstream_duplicates": 0, "aborted_reads": 0}
    common["beyond_retention"] = 0
    common |= {"late_records": 0, "claim": "group commits"}
    common |= {"filtered": 0, "filter_undecided": 0}
    common |= {"torn_commits": 0, "producer_out_of_order": 0, "sink_out_of_order": 0}
    common |= {"truncated_records": 0, "inconsistent_offsets": 0}
    common |= LATENCY
    return [
        {
            **common,
            "pipeline": "orders-alo",
            "late_records": 2,  # evidence.late_records
            "declared": "at-least-once",
            "achieved": "at-least-once",
            "meets_declared": True,
            "records_checked": 4800,
            "sink_records": 4802,
            "distinct_ids": 4800,
            "duplicate_copies": 2,
            "duplicate_rate": 2 / 4800,
            "lost": 0,
            "loss_rate": 0.0,
            "faults_observed": 3,
            "evidence": "tested",
            "first_record_at": 600,
            "last_record_at": 35,
            "source_topics": ["orders"],
            "sink": ["orders-enriched"],
            "consumer_group": "orders-enricher",
            "claim_detail": "group orders-enricher",
        },
        {
            **common,
            "pipeline": "payments-eos",
            "declared": "exactly-once",
            "achieved": "no guarantee",
            "meets_declared": False,
            "records_checked": 2400,
            "sink_records": 2399,
            "distinct_ids": 2395,
            "duplicate_copies": 4,
            "duplicate_rate": 4 / 2395,
            "lost": 5,
            "loss_rate": 5 / 2400,
            "aborted_reads": 1,
            "torn_commits": 1,
            "producer_out_of_order": 2,
            "sink_out_of_order": 1,
            "faults_observed": 4,
            "evidence": "tested",
            "first_record_at": 600,
            "last_record_at": 40,
            "source_topics": ["payments"],
            "sink": ["payments-ledger"],
            "consumer_group": "payments-processor",
            "claim_detail": "group payments-processor",
            "truncated_records": TRUNCATED,
            "inconsistent_offsets": INCONSISTENT,
        },
        {
            **common,
            "pipeline": "audit-trail",
            "declared": "exactly-once",
            "achieved": "insufficient evidence",
            "meets_declared": None,
            "records_checked": 40,
            "sink_records": 40,
            "distinct_ids": 40,
            "duplicate_copies": 0,
            "duplicate_rate": 0.0,
            "lost": 0,
            "loss_rate": 0.0,
            "faults_observed": 0,
            "evidence": "untested",
            "first_record_at": 300,
            "last_record_at": 60,
            "source_topics": ["audit-in"],
            "sink": ["audit-out"],
            "consumer_group": "audit-copier",
            "claim_detail": "group audit-copier",
        },
    ]


def stages() -> list[Row]:
    """orders-alo's producer retried (1% extra copies already in `orders`)."""
    return [
        {
            "pipeline": "orders-alo",
            "chain": ["orders-alo"],
            "first_sources": ["orders"],
            "producer_records": 4848,
            "producer_duplicate_copies": 48,
            "producer_duplicate_rate": 0.01,
            "producer_sequence_gaps": 0,
            "producer_achieved": "at-least-once",
            "end_to_end_achieved": "at-least-once",
        }
    ]


def windows(judged: list[Row]) -> list[Row]:
    rows = []
    for v in judged:
        for w in range(WINDOWS):
            checked = int(v["records_checked"]) // WINDOWS
            dups = 1 if v["duplicate_copies"] and w in (1, 3, 6, 8)[: v["duplicate_copies"]] else 0
            lost = 2 if v["lost"] and w == 4 else 0
            bad = bool(v["meets_declared"] is False and (dups or lost))
            shown = within_window(out_of_order(), (WINDOWS - w) * WINDOW_S)
            sources = v["source_topics"]
            row = {
                "pipeline": v["pipeline"],
                "window_start": (WINDOWS - w) * WINDOW_S,
                "records_checked": checked,
                "duplicate_copies": dups,
                "duplicate_rate": dups / checked if checked else None,
                "lost": lost,
                "loss_rate": lost / checked if checked else None,
                "aborted_reads": 0,
                "beyond_retention": 0,
                "late_records": 0,
                "faults_observed": 1 if w in (2, 5) and v["faults_observed"] else 0,
                "achieved": "no guarantee" if bad else v["achieved"],
                "meets_declared": False if bad else v["meets_declared"],
                "filtered": 0,
                "filter_undecided": 0,
                "torn_commits": 1 if v["torn_commits"] and w == 4 else 0,
                "producer_out_of_order": sum(
                    1 for r in shown if r["pipeline"] is None and r["topic"] in sources
                ),
                "sink_out_of_order": sum(1 for r in shown if r["pipeline"] == v["pipeline"]),
                "truncated_records": v["truncated_records"] if w == TRUNCATED_WINDOW else 0,
                "inconsistent_offsets": (v["inconsistent_offsets"] if w == TRUNCATED_WINDOW else 0),
                **LATENCY,
                "latency_measured": checked,
            }
            rows.append(_with_intervals(row))
    return rows


def topic_and_partition_windows(dups: list[Row]) -> tuple[list[Row], list[Row]]:
    topics, partitions = [], []
    extra = [d for d in dups if d["is_extra_copy"]]
    for topic, count in TOPICS.items():
        aborted_total = 6 if topic == "payments-ledger" else 0
        records_total = 0
        for w in range(WINDOWS):
            start = (WINDOWS - w) * WINDOW_S
            in_window = [
                d
                for d in extra
                if d["topic"] == topic and start - WINDOW_S < d["timestamp"] <= start
            ]
            for p in range(count):
                partitions.append(
                    {
                        "topic": topic,
                        "partition": p,
                        "window_start": start,
                        "records": 80 + 7 * p,
                        "duplicate_copies": sum(1 for d in in_window if d["partition"] == p),
                        "aborted": 3
                        if topic == "payments-ledger" and w in (4, 7) and p == 1
                        else 0,
                    }
                )
            records = sum(80 + 7 * p for p in range(count))
            records_total += records
            topics.append(
                {
                    "topic": topic,
                    "window_start": start,
                    "records": records,
                    "distinct_ids": records - len(in_window),
                    "duplicate_copies": len(in_window),
                    "duplicate_rate": len(in_window) / (records - len(in_window)),
                    "unidentified": 0,
                    "aborted": 3 if topic == "payments-ledger" and w in (4, 7) else 0,
                    "out_of_order": sum(
                        1 for r in within_window(out_of_order(), start) if r["topic"] == topic
                    ),
                    **truncations(topic, w == TRUNCATED_WINDOW),
                }
            )
        n_extra = sum(1 for d in extra if d["topic"] == topic)
        topics.append(
            {
                "topic": topic,
                "window_start": None,
                "records": records_total,
                "distinct_ids": records_total - n_extra,
                "duplicate_copies": n_extra,
                "duplicate_rate": n_extra / (records_total - n_extra),
                "unidentified": 0,
                "aborted": aborted_total,
                "out_of_order": sum(1 for r in out_of_order() if r["topic"] == topic),
                **truncations(topic, True),
            }
        )
    return topics, partitions


def latency_histogram(judged: list[Row]) -> list[Row]:
    """Each pipeline's measured records per window in three buckets around its p50 and p99."""
    buckets = ((2**-1.25, 2**-1.0, 0.5), (2**1.75, 2**2.0, 0.49), (2**2.75, 2**3.0, 0.01))
    rows = []
    for v in judged:
        per_window = int(v["records_checked"]) // WINDOWS
        for w in range(WINDOWS):
            for low, high, share in buckets:
                rows.append(
                    {
                        "pipeline": v["pipeline"],
                        "window_start": (WINDOWS - w) * WINDOW_S,
                        "low_s": low,
                        "high_s": high,
                        "records": round(per_window * share),
                    }
                )
    return rows
