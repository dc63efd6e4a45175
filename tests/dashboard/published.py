"""A published `dgm.duckdb` with realistic rows, built from `dgm/contracts/published.py`'s DDL.

It stands in for a real `dgm analyze` run until the lab can publish one: swap `build` for a
lab run and the dashboard tests keep their meaning. Three pipelines:

- `orders-alo` declares at-least-once and meets it: two ids duplicated by reprocessing
  (allowed at-least-once), nothing lost, tested across faults.
- `payments-eos` declares exactly-once and violates it: three duplicated ids in its sink
  (reprocessing and producer retry), two lost records (one a torn commit) and one sequence
  gap; its source producer wrote two records out of order, its sink holds one; its sink's
  partition 0 was truncated: two records truncated, one of their offsets taken by another
  record (an inconsistent offset).
- `audit-trail` has too few checked records: insufficient evidence.

The ledger topic holds one open and one hanging transaction; the hanging one pins the LSO of
partition 1, so the `ledger-auditor` group's lag from the high watermark exceeds its lag from
the LSO.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from dgm.contracts.published import PUBLISHED_FILE, TABLES
from dgm.contracts.published_views import create_views
from dgm.contracts.sampling import rate_interval
from spark_jobs.analyze.group_status import Sample, evaluate, summarize, worst

WINDOW_S = 60
WINDOWS = 10
# payments-eos's sink: truncated records and inconsistent offsets, in one window.
TRUNCATED_TOPIC = "payments-ledger"
TRUNCATED, INCONSISTENT, TRUNCATED_WINDOW = 2, 1, 3
SAMPLE_EVERY_S = 30

Row = dict[str, Any]

# topic -> partitions
TOPICS = {
    "orders": 3,
    "orders-enriched": 3,
    "payments": 2,
    "payments-ledger": 2,
    "audit-in": 1,
    "audit-out": 1,
}


@dataclass
class Expected:
    """What the tests may assert about the built file."""

    path: Path
    now: datetime
    duplicated_ids: dict[str, int] = field(default_factory=dict)  # topic -> distinct ids
    extra_copies: dict[str, int] = field(default_factory=dict)
    lost_ids: dict[str, int] = field(default_factory=dict)  # source topic -> lost rows


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


def _duplicates() -> list[Row]:
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


def _lost() -> list[Row]:
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


def _out_of_order() -> list[Row]:
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


def _in_window(rows: list[Row], start: int) -> list[Row]:
    return [r for r in rows if start - WINDOW_S < r["timestamp"] <= start]


# orders-alo keeps 1 in 10 message ids (docs/design.md, "Sampled pipelines").
SAMPLED = {"orders-alo": 10}


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


def _verdicts() -> list[Row]:
    return [_with_intervals(row) for row in _exact_verdicts()]


def _exact_verdicts() -> list[Row]:
    common: Row = {"unidentified": 0, "upstream_duplicates": 0, "aborted_reads": 0}
    common["beyond_retention"] = 0
    common |= {"late_records": 0, "claim": "group commits"}
    common |= {"filtered": 0, "filter_undecided": 0}
    common |= {"torn_commits": 0, "producer_out_of_order": 0, "sink_out_of_order": 0}
    common |= {"truncated_records": 0, "inconsistent_offsets": 0}
    return [
        {
            **common,
            "pipeline": "orders-alo",
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


def _stages() -> list[Row]:
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


def _windows(verdicts: list[Row]) -> list[Row]:
    rows = []
    for v in verdicts:
        for w in range(WINDOWS):
            checked = int(v["records_checked"]) // WINDOWS
            dups = 1 if v["duplicate_copies"] and w in (1, 3, 6, 8)[: v["duplicate_copies"]] else 0
            lost = 2 if v["lost"] and w == 4 else 0
            bad = bool(v["meets_declared"] is False and (dups or lost))
            shown = _in_window(_out_of_order(), (WINDOWS - w) * WINDOW_S)
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
            }
            rows.append(_with_intervals(row))
    return rows


def _topic_and_partition_windows(dups: list[Row]) -> tuple[list[Row], list[Row]]:
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
                        1 for r in _in_window(_out_of_order(), start) if r["topic"] == topic
                    ),
                    **_truncations(topic, w == TRUNCATED_WINDOW),
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
                "out_of_order": sum(1 for r in _out_of_order() if r["topic"] == topic),
                **_truncations(topic, True),
            }
        )
    return topics, partitions


def _truncations(topic: str, counted: bool) -> Row:
    mine = counted and topic == TRUNCATED_TOPIC
    return {
        "truncated_records": TRUNCATED if mine else 0,
        "inconsistent_offsets": INCONSISTENT if mine else 0,
    }


def _log_anomalies() -> list[Row]:
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


def _offsets_and_lag(now: datetime) -> tuple[list[Row], list[Row]]:
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
                            "lag_from_hw": hw - committed,
                            "lag_from_lso": lso - committed,
                        }
                    )
    return offsets, lag


def _group_status(lag: list[Row], size: int = 10) -> list[Row]:
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
        rows.append({"group_id": group, "topic": topic, "partition": partition,
                     "status": status, "severity": status.severity, "reason": reason,
                     "status_from_hw": evaluate(by_hw)[0], "samples": by_lso.samples,
                     "window_start": found[0]["sampled_at"], "window_end": found[-1]["sampled_at"],
                     "committed_start": by_lso.committed_start,
                     "committed_end": by_lso.committed_end, "lso_lag_start": by_lso.lag_start,
                     "lso_lag_end": by_lso.lag_end, "hw_lag_end": by_hw.lag_end,
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
                     "group_state": "Stable"})  # fmt: skip
    return rows


def _transactions() -> list[Row]:
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


def _faults() -> list[Row]:
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


def _runs(now: datetime, finished_ago_s: int) -> list[Row]:
    return [
        {
            "run_id": "run-0001",
            "started_at": finished_ago_s + 12,
            "finished_at": finished_ago_s,
            "last_sample_at": finished_ago_s + 5,
            "records_audited": 1200,
            "fingerprints": 7240,
            "window_s": WINDOW_S,
            "spark_master": "local[*]",
        },
    ]


_TIME_COLUMNS = {c.name for t in TABLES for c in t.columns if c.sql_type == "TIMESTAMPTZ"}


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[Row], now: datetime) -> None:
    spec = next(t for t in TABLES if t.name == table)
    names = ", ".join(f'"{n}"' for n in spec.names)
    marks = ", ".join("?" for _ in spec.names)
    values = []
    for row in rows:
        unknown = set(row) - set(spec.names)
        assert not unknown, f"{table}: no such columns {unknown}"
        values.append(
            [
                now - timedelta(seconds=row[n])
                if n in _TIME_COLUMNS and isinstance(row.get(n), int)
                else row.get(n)
                for n in spec.names
            ]
        )
    if values:
        con.executemany(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', values)


def build(state_dir: Path, *, now: datetime | None = None, finished_ago_s: int = 20) -> Expected:
    """Publish the file into `state_dir` the way `dgm analyze` does (new file, then rename).

    Times in the rows above are seconds before `now` (default: the current time), so the
    data is fresh unless `finished_ago_s` says the last run is old.
    """
    now = now or datetime.now(UTC).replace(microsecond=0)
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / PUBLISHED_FILE
    temp = state_dir / f".{PUBLISHED_FILE}.tmp"
    temp.unlink(missing_ok=True)
    dups = _duplicates()
    verdicts = _verdicts()
    topic_windows, partition_windows = _topic_and_partition_windows(dups)
    offsets, lag = _offsets_and_lag(now)
    content = {
        "runs": _runs(now, finished_ago_s),
        "verdicts": verdicts,
        "pipeline_windows": _windows(verdicts),
        "topic_windows": topic_windows,
        "partition_windows": partition_windows,
        "duplicates": dups,
        "lost": _lost(),
        "out_of_order": _out_of_order(),
        "partition_offsets": offsets,
        "group_lag": lag,
        "group_status": _group_status(lag),
        "transactions": _transactions(),
        "faults": _faults(),
        "pipeline_stages": _stages(),
        "log_anomalies": _log_anomalies(),
    }
    with duckdb.connect(str(temp)) as con:
        con.execute("SET TimeZone = 'UTC'")
        for table in TABLES:
            con.execute(table.ddl())
            _insert(con, table.name, content.get(table.name, []), now)  # else empty
        create_views(con)  # as spark_jobs/analyze/publish.py does
    os.replace(temp, path)
    expected = Expected(path, now)
    for d in dups:
        ids = {x["message_id"] for x in dups if x["topic"] == d["topic"]}
        expected.duplicated_ids[d["topic"]] = len(ids)
        expected.extra_copies[d["topic"]] = sum(
            1 for x in dups if x["topic"] == d["topic"] and x["is_extra_copy"]
        )
    expected.lost_ids["payments"] = len(_lost())
    return expected


if __name__ == "__main__":  # python tests/dashboard/published.py DIR: a file to look at
    import sys

    print(build(Path(sys.argv[1] if len(sys.argv) > 1 else ".dgm")).path)
