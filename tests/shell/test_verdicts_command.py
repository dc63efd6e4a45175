"""`dgm verdicts` over the hand-made publication: the table and the JSON carry each
pipeline's truncated records and inconsistent offsets."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from dgm.contracts.published import PUBLISHED_FILE, verdicts_document
from shell.verdicts_command import format_table, read_verdicts, sampled_rates
from tests.support.published_world.publish import recent_copy


def test_verdicts_show_the_log_integrity_counts(tmp_path: Path) -> None:
    recent_copy(tmp_path)
    rows, finished, _, _, _ = read_verdicts(tmp_path)
    lines = format_table(rows).splitlines()
    header = lines[0].split()
    at = header.index("truncated")
    assert header[at : at + 4] == ["truncated", "inconsistent", "faults", "evidence"]
    payments = next(line for line in lines if line.startswith("payments-eos"))
    # truncated, inconsistent, faults, evidence
    assert re.search(r" 2 +1 +4 +tested ", payments), payments
    document = json.loads(
        json.dumps(verdicts_document(rows, finished, 60.0, datetime.now(UTC), [], []), default=str)
    )
    by_name = {p["pipeline"]: p for p in document["pipelines"]}
    assert (
        by_name["payments-eos"]["truncated_records"],
        by_name["payments-eos"]["inconsistent_offsets"],
    ) == (2, 1)


def test_a_sampled_pipeline_says_its_share_and_its_rates_intervals(tmp_path: Path) -> None:
    recent_copy(tmp_path)  # orders-alo keeps 1 in 10 ids
    rows, finished, _, _, _ = read_verdicts(tmp_path)
    lines = format_table(rows).splitlines()
    assert "ids kept" in lines[0]
    orders = next(line for line in lines if line.startswith("orders-alo"))
    payments = next(line for line in lines if line.startswith("payments-eos"))
    assert " 1 in 10 " in f"{orders} " and " all " in f"{payments} "
    told = sampled_rates(rows)
    assert told == [
        "orders-alo: counts of 1 in 10 message ids; duplicate rate 0.0417% (95%: 0.0114% to "
        "0.152%), loss rate 0% (95%: 0% to 0.08%)"
    ]
    document = verdicts_document(rows, finished, 60.0, datetime.now(UTC), [], [])
    by_name = {p["pipeline"]: p for p in document["pipelines"]}
    assert by_name["orders-alo"]["sample_one_in"] == 10
    assert by_name["orders-alo"]["loss_rate_high"] > 0 == by_name["orders-alo"]["loss_rate"]


def test_the_json_carries_each_consumer_groups_lag_in_seconds(tmp_path: Path) -> None:
    recent_copy(tmp_path)
    rows, finished, _, _, _ = read_verdicts(tmp_path)
    document = verdicts_document(rows, finished, 60.0, datetime.now(UTC), [], [])
    by_name = {p["pipeline"]: p for p in json.loads(json.dumps(document, default=str))["pipelines"]}
    with duckdb.connect(str(tmp_path / PUBLISHED_FILE), read_only=True) as db:
        groups = dict(
            db.execute(
                "SELECT group_id, lag_s_end FROM group_status_by_group WHERE lag_s_end IS NOT NULL"
            ).fetchall()
        )
    with_group = [p for p in by_name.values() if p["consumer_group"] in groups]
    assert with_group, "the world's pipelines have consumer groups with a lag in seconds"
    for pipeline in with_group:
        assert pipeline["consumer_lag_s"] == groups[pipeline["consumer_group"]]
        assert pipeline["consumer_catching_up"] in (True, False)
    assert all(
        p["consumer_lag_s"] is None for p in by_name.values() if p["consumer_group"] not in groups
    )
