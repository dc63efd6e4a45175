"""Burrow's rules over lag from the LSO: the pure function on hand-written series, and the
published table giving the same answers on the same series."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dgm.config.loader import load_config
from dgm.config.problems import ConfigError
from dgm.contracts.sample_schemas import SCHEMAS
from dgm.contracts.vocabulary import GroupStatus
from spark_jobs.analyze.group_status import (
    Sample,
    group_status,
    partition_status,
    summarize,
    worst,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WINDOW = 4


def series(committed: list[int], lso: list[int], owned: bool = True) -> list[Sample]:
    return [
        Sample(T0 + timedelta(seconds=10 * i), c, e, owned)
        for i, (c, e) in enumerate(zip(committed, lso, strict=True))
    ]


# name -> (samples, status): each series built to reach one rule.
SERIES: dict[str, tuple[list[Sample], str]] = {
    # Lag 5, 0, 3, 2: it touched 0 within the window.
    "caught-up": (series([0, 10, 12, 15], [5, 10, 15, 17]), GroupStatus.OK),
    # Lag 10, 8, 9, 7: it falls somewhere, so the consumer keeps up.
    "keeps-up": (series([0, 10, 19, 30], [10, 18, 28, 37]), GroupStatus.OK),
    "one-sample": (series([3], [9]), GroupStatus.OK),
    # Lag 2, 4, 6, 8 while the offset moves: falling behind.
    "falling-behind": (series([0, 3, 6, 9], [2, 7, 12, 17]), GroupStatus.WARN),
    # Lag 2, 2, 4, 4: never falls, grows overall.
    "falling-behind-in-steps": (series([0, 3, 6, 9], [2, 5, 10, 13]), GroupStatus.WARN),
    # Same offset, lag constant, a member assigned: stuck.
    "stuck": (series([5, 5, 5, 5], [9, 9, 9, 9]), GroupStatus.STALL),
    # Same offset, lag growing, a member assigned: still stuck, not stopped.
    "stuck-while-producers-write": (series([5, 5, 5, 5], [9, 11, 13, 15]), GroupStatus.STALL),
    # Nobody owns the partition, lag constant: stopped.
    "stopped": (series([5, 5, 5, 5], [9, 9, 9, 9], owned=False), GroupStatus.STOP),
    # Nobody owns the partition and lag grows: stopped while producers write.
    "stopped-while-producers-write": (
        series([5, 5, 5, 5], [9, 11, 13, 15], owned=False),
        GroupStatus.ERR,
    ),
    # Caught up, then reset backwards: zero lag before does not hide it.
    "rewound": (series([10, 10, 10, 2], [10, 10, 10, 10]), GroupStatus.REWIND),
    # A rewind that caught up again is over.
    "rewound-and-caught-up": (series([10, 2, 6, 10], [10, 10, 10, 10]), GroupStatus.OK),
    # The LSO pinned by an open transaction at 6; the consumer committed 6: lag 0, OK.
    "pinned-lso": (series([6, 6, 6, 6], [6, 6, 6, 6]), GroupStatus.OK),
}


@pytest.mark.parametrize("name", SERIES)
def test_each_series_reaches_its_status(name: str) -> None:
    samples, expected = SERIES[name]
    assert partition_status(samples, WINDOW)[0] == expected


def test_the_window_is_the_last_samples_only() -> None:
    # Lag 0 in the first sample, then 4, 6, 8, 10: with 4 samples the zero has slid out.
    samples = series([0, 1, 2, 3, 4], [0, 5, 8, 11, 14])
    assert partition_status(samples, 5)[0] == GroupStatus.OK
    assert partition_status(samples, 4)[0] == GroupStatus.WARN


def test_an_offset_that_moved_before_the_window_is_not_stopped_within_it() -> None:
    # Moved at the third sample, unchanged since: within a window of 2 it has not moved...
    samples = series([1, 2, 5, 5, 5], [9, 9, 9, 9, 9], owned=False)
    assert summarize(samples, 2).unmoved and partition_status(samples, 2)[0] == GroupStatus.STOP
    # ...but within a window of 4 it did (from 2 to 5, after the window began).
    assert not summarize(samples, 4).unmoved
    assert partition_status(samples, 4)[0] == GroupStatus.OK


def test_the_same_samples_with_lag_from_the_high_watermark_look_stalled() -> None:
    # HW 9 while the LSO is pinned at 6: a consumer at 6 has HW lag 3, never falling.
    by_lso = series([6, 6, 6, 6], [6, 6, 6, 6])
    by_hw = series([6, 6, 6, 6], [9, 9, 9, 9])
    assert (partition_status(by_lso, WINDOW)[0], partition_status(by_hw, WINDOW)[0]) == (
        GroupStatus.OK,
        GroupStatus.STALL,
    )


def test_a_group_takes_its_worst_partition() -> None:
    assert worst([GroupStatus.OK, GroupStatus.WARN, GroupStatus.STALL]) == GroupStatus.STALL
    assert worst([GroupStatus.STOP, GroupStatus.ERR, GroupStatus.OK]) == GroupStatus.ERR
    assert worst([]) == GroupStatus.OK
    assert [s.severity for s in GroupStatus] == [0, 1, 2, 3, 4, 5]


def _rows(
    group: str, samples: list[Sample], kind: str = "classic", share_lag: int | None = None
) -> list[tuple[Any, ...]]:
    return [
        (s.at, "c", group, "t", 0, s.committed, "Stable", "m" if s.owned else None,
         s.lso + 3, s.lso, s.lso + 3 - s.committed, s.lso - s.committed, kind, share_lag)
        for s in samples
    ]  # fmt: skip


def test_a_share_group_is_judged_by_its_share_lag_where_the_broker_tells_it() -> None:
    """A finished share group without members: its start offset trails 4 acknowledged records
    (lag from it 4, constant, nobody assigned: STOP by the rules), but the broker counts 0
    unacknowledged: OK. Where the broker does not tell it (before Kafka 4.2), STOP stays."""
    trailing = series([5, 5, 5, 5], [9, 9, 9, 9], owned=False)
    rows = [*_rows("told", trailing, "share", 0), *_rows("untold", trailing, "share", None)]
    schema = SCHEMAS["group_offsets"]
    frame = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema)
    got = {r["group_id"]: r for r in group_status(frame, WINDOW).to_pylist() if r["topic"]}
    assert (got["told"]["status"], got["told"]["lso_lag_end"]) == (GroupStatus.OK, 0)
    assert (got["untold"]["status"], got["untold"]["lso_lag_end"]) == (GroupStatus.STOP, 4)


def test_the_table_judges_by_the_same_rules() -> None:
    rows = [row for name, (samples, _) in SERIES.items() for row in _rows(name, samples)]
    schema = SCHEMAS["group_offsets"]
    frame = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema)
    got = {(r["group_id"], r["topic"]): r for r in group_status(frame, WINDOW).to_pylist()}
    for name, (samples, expected) in SERIES.items():
        row = got[(name, "t")]
        assert (name, row["status"], row["reason"]) == (name, *partition_status(samples, WINDOW))
        assert row["severity"] == GroupStatus(expected).severity
        assert row["samples"] == min(len(samples), WINDOW)
        assert row["committed_end"] == samples[-1].committed
        assert row["lso_lag_end"] == max(samples[-1].lso - samples[-1].committed, 0)
        assert row["hw_lag_end"] == row["lso_lag_end"] + 3
        group = got[(name, None)]
        assert (group["status"], group["partition"]) == (expected, None)
    assert got[("pinned-lso", "t")]["status_from_hw"] == GroupStatus.STALL
    assert got[("stopped", "t")]["member_id"] is None
    assert got[("stuck", None)]["reason"] == "worst: t[0] is STALL (1 of 1 partitions not OK)"


def test_a_window_of_fewer_than_two_samples_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "dgm.toml"
    path.write_text("[analysis]\ngroup_status_window = 1\n")
    with pytest.raises(
        ConfigError, match=r"dgm\.toml: analysis\.group_status_window: expected a count of samples"
    ):
        load_config(path)
