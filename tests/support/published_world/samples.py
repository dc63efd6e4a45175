"""What the collectors sampled for the hand-made publication: offsets, lag and the groups'
status judged from it, the ledger's open and hanging transactions, and the faults seen."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pandas as pd

from spark_jobs.analyze.group_status import Sample, evaluate, group_pace, summarize, worst
from spark_jobs.analyze.lag_seconds import catch_up, with_lag_seconds
from tests.support.published_world.shape import SAMPLE_EVERY_S, TOPICS, WINDOW_S, WINDOWS, Row


def offsets_and_lag(now: datetime) -> tuple[list[Row], list[Row]]:
    offsets, lag = [], []
    samples = WINDOWS * WINDOW_S // SAMPLE_EVERY_S
    groups = {
        "orders": "orders-enricher",
        "payments": "payments-processor",
        "payments-ledger": "ledger-auditor",
        "audit-in": "audit-copier",
    }
    for i in range(samples + 1):
        ago = (samples - i) * SAMPLE_EVERY_S + 25
        for topic, count in TOPICS.items():
            for p in range(count):
                hw = 1000 + 40 * i + 5 * p
                lso = hw
                stuck = 0
                if topic == "payments-ledger" and p == 1 and i >= samples - 12:
                    lso = 1000 + 40 * (samples - 12) + 5 * p  # pinned by the hanging transaction
                    stuck = (i - (samples - 12)) * SAMPLE_EVERY_S * 1000
                elif topic == "payments-ledger" and p == 0:
                    lso = hw - 2  # an open transaction's records and its marker
                offsets.append(
                    {
                        "sampled_at": ago,
                        "topic": topic,
                        "partition": p,
                        "log_start_offset": 0,
                        "high_watermark": hw,
                        "lso": lso,
                        "lso_lag": hw - lso,
                        "lso_stuck_ms": stuck,
                    }
                )
                if topic in groups:
                    committed = min(lso, hw - 15 - 3 * (i % 4))
                    lag.append(
                        {
                            "sampled_at": ago,
                            "group_id": groups[topic],
                            "topic": topic,
                            "partition": p,
                            "committed_offset": committed,
                            "group_state": "Stable",
                            "group_type": "classic",
                            "lag_from_hw": hw - committed,
                            "lag_from_lso": lso - committed,
                        }
                    )
                if topic == "orders":  # a share group beside: its start offsets trail
                    start = hw - 30 - 2 * (i % 3)
                    lag.append(
                        {
                            "sampled_at": ago,
                            "group_id": "orders-queue",
                            "topic": topic,
                            "partition": p,
                            "committed_offset": start,
                            "group_state": "Stable",
                            "group_type": "share",
                            "lag_from_hw": hw - start,
                            "lag_from_lso": lso - start,
                            "share_lag": 3 + i % 2,
                        }
                    )
    return offsets, lagged(offsets, lag, now)


def lagged(offsets: list[Row], lag: list[Row], now: datetime) -> list[Row]:
    """The lag rows with their lag in seconds, as the analysis works it out from the offsets
    samples (sampled_at is seconds ago here)."""

    def frame(rows: list[Row]) -> pd.DataFrame:
        found = pd.DataFrame(rows)
        return found.assign(sampled_at=[now - timedelta(seconds=a) for a in found["sampled_at"]])

    seconds = with_lag_seconds(frame(lag), frame(offsets))
    columns = ("lag_s", "lag_s_at_least", "lag_s_resolution")
    return [{**row, **{c: seconds[c].iloc[i].item() for c in columns}} for i, row in enumerate(lag)]


def group_status(lag: list[Row], size: int = 10) -> list[Row]:
    """group_status as the analysis judges these lag rows (the rules' pure evaluation)."""
    series: dict[tuple[str, str, int], list[Row]] = {}
    for row in lag:
        series.setdefault((row["group_id"], row["topic"], row["partition"]), []).append(row)
    rows: list[Row] = []
    for (group, topic, partition), found in sorted(series.items()):
        found = sorted(found, key=lambda r: -r["sampled_at"])[-size:]  # seconds ago: oldest first

        def judged(lag_column: str, found: list[Row] = found) -> Any:
            return summarize(
                [Sample(-r["sampled_at"], r["committed_offset"],
                        r["committed_offset"] + r[lag_column]) for r in found],
                size,
            )  # fmt: skip

        by_lso, by_hw = judged("lag_from_lso"), judged("lag_from_hw")
        status, reason = evaluate(by_lso)
        pace = catch_up(
            [pd.Timestamp(-r["sampled_at"], unit="s", tz="UTC") for r in found],
            [r["committed_offset"] for r in found],
            [r["committed_offset"] + r["lag_from_lso"] for r in found],
            [r["lag_s"] for r in found],
        )
        rows.append({"group_id": group, "topic": topic, "partition": partition,
                     "status": status, "severity": status.severity, "reason": reason,
                     "status_from_hw": evaluate(by_hw)[0], "samples": by_lso.samples,
                     "window_start": found[0]["sampled_at"], "window_end": found[-1]["sampled_at"],
                     "committed_start": by_lso.committed_start,
                     "committed_end": by_lso.committed_end, "lso_lag_start": by_lso.lag_start,
                     "lso_lag_end": by_lso.lag_end, "hw_lag_end": by_hw.lag_end,
                     "lag_s_start": found[0]["lag_s"], "lag_s_end": found[-1]["lag_s"],
                     "lag_s_at_least": found[-1]["lag_s_at_least"],
                     "lag_s_trend": pace.lag_s_trend, "consume_rate": pace.consume_rate,
                     "produce_rate": pace.produce_rate, "catch_up_s": pace.catch_up_s,
                     "catching_up": pace.catching_up,
                     "member_id": f"{group}-0", "group_state": "Stable"})  # fmt: skip
    for group in sorted({r["group_id"] for r in rows}):
        mine = [r for r in rows if r["group_id"] == group]
        status = worst([r["status"] for r in mine])
        rows.append({"group_id": group, "status": status, "severity": status.severity,
                     "reason": "worst of its partitions",
                     "status_from_hw": worst([r["status_from_hw"] for r in mine]),
                     "samples": min(r["samples"] for r in mine),
                     "window_start": mine[0]["window_start"], "window_end": mine[0]["window_end"],
                     **{k: sum(r[k] for r in mine)
                        for k in ("lso_lag_start", "lso_lag_end", "hw_lag_end")},
                     **group_pace(mine), "group_state": "Stable"})  # fmt: skip
    return rows


def transactions() -> list[Row]:
    return [
        {
            "sampled_at": 25,
            "topic": "payments-ledger",
            "partition": 0,
            "producer_id": 4001,
            "producer_epoch": 3,
            "transactional_id": "payments-processor-0",
            "txn_start_offset": 1838,
            "age_ms": 1_800,
            "hanging": False,
            "hanging_reason": None,
        },
        {
            "sampled_at": 25,
            "topic": "payments-ledger",
            "partition": 1,
            "producer_id": 3990,
            "producer_epoch": 1,
            "transactional_id": None,
            "txn_start_offset": 1365,
            "age_ms": 361_000,
            "hanging": True,
            "hanging_reason": "the coordinator has no ongoing transaction for producer 3990",
        },
    ]


def faults() -> list[Row]:
    return [
        {
            "at": 590,
            "event": "collector_start",
            "group_id": None,
            "pipeline": None,
            "detail": "collector started",
        },
        {
            "at": 470,
            "event": "rebalance",
            "group_id": "orders-enricher",
            "pipeline": "orders-alo",
            "detail": "generation 4 -> 5",
        },
        {
            "at": 465,
            "event": "member_left",
            "group_id": "orders-enricher",
            "pipeline": "orders-alo",
            "detail": "consumer-1 left",
        },
        {
            "at": 290,
            "event": "member_joined",
            "group_id": "orders-enricher",
            "pipeline": "orders-alo",
            "detail": "consumer-1 joined",
        },
        {
            "at": 530,
            "event": "epoch_bump",
            "group_id": None,
            "pipeline": "payments-eos",
            "detail": "producer 4001 epoch 2 -> 3",
        },
        {
            "at": 415,
            "event": "rebalance",
            "group_id": "payments-processor",
            "pipeline": "payments-eos",
            "detail": "generation 7 -> 8",
        },
        {
            "at": 410,
            "event": "member_left",
            "group_id": "payments-processor",
            "pipeline": "payments-eos",
            "detail": "processor-0 left (killed)",
        },
        {
            "at": 395,
            "event": "member_joined",
            "group_id": "payments-processor",
            "pipeline": "payments-eos",
            "detail": "processor-0 joined",
        },
    ]
