"""Causes without dgm's headers (spark_jobs/analyze/explain.py), on hand-made copies: each
rule decides what its evidence decides, and leaves `unknown` where nothing does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from spark_jobs.analyze.explain import copy_arrivals, explained, group_timeline
from spark_jobs.analyze.lag_seconds import arrivals

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
SINK, SOURCE, GROUP = "out", "in", "relay"


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def offsets_samples(partitions: int = 2) -> pd.DataFrame:
    """The sink's LSO grows by one record a second: offset o is readable at o + 1 s."""
    return pd.DataFrame(
        [
            {"sampled_at": _at(s), "topic": SINK, "partition": p, "lso": s}
            for s in range(0, 200, 5)
            for p in range(partitions)
        ]
    )


def copy(message_id: str, number: int, offset: int, **extra: object) -> dict[str, object]:
    row: dict[str, object] = {
        "pipeline": "p",
        "topic": SINK,
        "message_id": message_id,
        "copy_number": number,
        "partition": 0,
        "offset": offset,
        "timestamp": _at(offset),
        "cause": "unknown",
        "source_topic": SOURCE,
        "source_partition": 0,
        "source_offset": int(message_id.split("-")[1]),
    }
    return row | extra


def batches(*rows: tuple[int, int | None, int | None, int | None]) -> pd.DataFrame:
    """(offset, producer id, epoch, sequence) of sink partition 0's copies."""
    return pd.DataFrame(
        [
            {
                "topic": SINK,
                "partition": 0,
                "offset": o,
                "producer_id": pid,
                "producer_epoch": e,
                "producer_sequence": s,
            }
            for o, pid, e, s in rows
        ],
        columns=[
            "topic",
            "partition",
            "offset",
            "producer_id",
            "producer_epoch",
            "producer_sequence",
        ],
    ).astype({"producer_id": "Int64", "producer_epoch": "Int64", "producer_sequence": "Int64"})


def events(*rows: tuple[float, str]) -> pd.DataFrame:
    frame = pd.DataFrame(
        [{"sampled_at": _at(s), "event": e, "group_id": GROUP, "detail": e} for s, e in rows],
        columns=["sampled_at", "event", "group_id", "detail"],
    )
    offsets = pd.DataFrame(
        columns=["sampled_at", "group_id", "topic", "partition", "committed_offset"]
    )
    return group_timeline(frame, offsets)


def judged_plain(
    copies: list[dict[str, object]], found: pd.DataFrame, timeline: pd.DataFrame
) -> pd.DataFrame:
    return judged([c | {"pipeline": None} for c in copies], found, timeline)


def judged(
    copies: list[dict[str, object]], found: pd.DataFrame, timeline: pd.DataFrame
) -> pd.DataFrame:
    return explained(
        pd.DataFrame(copies), found, timeline, offsets_samples(), {"p": GROUP}, 1.0
    ).set_index(["message_id", "copy_number"])


def test_a_new_producer_session_after_a_member_joined_is_reprocessing_naming_both() -> None:
    rows = judged(
        [copy("id-1", 1, 10), copy("id-1", 2, 50, timestamp=_at(49))],
        batches((10, 5, 0, 10), (50, 9, 0, 0)),
        events((30, "member_joined")),
    )
    extra = rows.loc[("id-1", 2)]
    assert extra["cause"] == "reprocessing"
    assert "member_joined of group relay at 12:00:30" in extra["evidence"]
    assert "producer id 5 epoch 0 -> producer id 9 epoch 0" in extra["evidence"]
    assert rows.loc[("id-1", 1), "cause"] == "reprocessing"  # the id reads as its extra copy
    assert rows.loc[("id-1", 2), "producer_id"] == 9


def test_an_event_before_the_first_copy_or_after_the_extra_one_names_nothing() -> None:
    # Sampled at 80 s: more than one interval after the extra copy arrived (51 s).
    rows = judged(
        [copy("id-1", 1, 10), copy("id-1", 2, 50)],
        batches((10, None, None, None), (50, None, None, None)),
        events((5, "rebalance"), (80, "member_left")),
    )
    assert rows.loc[("id-1", 2), "cause"] == "unknown"
    assert "no group event between" in rows.loc[("id-1", 2), "evidence"]


def test_one_send_at_two_offsets_is_a_producer_retry() -> None:
    rows = judged(
        [copy("id-1", 1, 10), copy("id-1", 2, 11)],
        batches((10, 7, 2, 40), (11, 7, 2, 40)),
        events(),
    )
    assert rows.loc[("id-1", 2), "cause"] == "producer retry"
    assert rows.loc[("id-1", 2), "evidence"].endswith("producer id 7 epoch 2 sequence 40")


def test_a_resent_batch_without_producer_ids_is_a_retry_by_its_timestamp() -> None:
    same = _at(10)
    # In a topic that is no pipeline's sink (a producer's): pipeline None.
    rows = judged_plain(
        [copy("id-1", 1, 10, timestamp=same), copy("id-1", 2, 12, timestamp=same),
         copy("id-2", 1, 11), copy("id-2", 2, 13), copy("id-3", 1, 14), copy("id-3", 2, 15)],
        batches((10, None, None, None), (12, None, None, None)),
        events(),
    )  # fmt: skip
    assert rows.loc[("id-1", 2), "cause"] == "producer retry"
    assert rows.loc[("id-2", 2), "cause"] == "unknown"  # new timestamp, nothing between


def test_extra_copies_rewriting_a_source_range_in_order_are_one_replay_run() -> None:
    firsts = [copy(f"id-{n}", 1, n) for n in range(100, 104)]
    replayed = [copy(f"id-{n}", 2, 120 + n - 100) for n in range(100, 104)]
    rows = judged(firsts + replayed, batches(), events())
    for n in range(100, 104):
        extra = rows.loc[(f"id-{n}", 2)]
        assert extra["cause"] == "reprocessing"
        assert extra["evidence"].startswith(
            "replay run: source in/0 offsets 100-103 rewritten at out/0 offsets 120-123 (4 records)"
        )


def test_causes_the_headers_decided_keep_them_with_their_evidence() -> None:
    rows = judged(
        [copy("id-1", 1, 10, cause="upstream"), copy("id-1", 2, 50, cause="upstream")],
        batches((10, 5, 0, 1), (50, 9, 0, 0)),
        events((30, "member_joined")),
    )
    assert rows.loc[("id-1", 2), "cause"] == "upstream"
    assert "more than one committed record" in rows.loc[("id-1", 2), "evidence"]


def test_a_commit_that_moved_back_is_an_event_of_the_group() -> None:
    offsets = pd.DataFrame(
        {
            "sampled_at": [_at(0), _at(5), _at(10)],
            "group_id": GROUP,
            "topic": SOURCE,
            "partition": 0,
            "committed_offset": [40, 60, 30],
        }
    )
    empty = pd.DataFrame(columns=["sampled_at", "event", "group_id", "detail"])
    timeline = group_timeline(empty, offsets)
    assert timeline[["event", "detail"]].to_dict("records") == [
        {"event": "commit_backwards", "detail": "in[0] committed offset 60 -> 30"}
    ]


def test_a_run_of_copies_with_their_timestamps_forward_is_a_replay_not_a_retry() -> None:
    # MirrorMaker 2 copies the source timestamp: the copies of each id share it.
    firsts = [copy(f"id-{n}", 1, n, timestamp=_at(n)) for n in range(100, 104)]
    replayed = [copy(f"id-{n}", 2, 20 + n, timestamp=_at(n)) for n in range(100, 104)]
    rows = judged(firsts + replayed, batches(), events())
    assert {rows.loc[(f"id-{n}", 2), "cause"] for n in range(100, 104)} == {"reprocessing"}
    assert rows.loc[("id-100", 2), "evidence"].startswith("replay run: ")
    assert "resent batch" not in rows.loc[("id-100", 2), "evidence"]


def test_equal_timestamps_in_a_sink_name_nothing_without_a_run() -> None:
    same = _at(10)
    rows = judged(
        [copy("id-1", 1, 10, timestamp=same), copy("id-1", 2, 12, timestamp=same)],
        batches((10, None, None, None), (12, None, None, None)),
        events(),
    )
    assert rows.loc[("id-1", 2), "cause"] == "unknown"


def test_copy_arrivals_are_each_partitions_own_lso_series() -> None:
    rng = np.random.default_rng(3)
    start = pd.Timestamp("2026-01-01", tz="UTC")
    samples = [
        (start + pd.Timedelta(seconds=s), topic, partition, 10 * s + 3 * partition + len(topic))
        for s in range(20)
        for topic in ("a", "bb")
        for partition in range(3)
        if (topic, partition) != ("bb", 2)  # a partition never sampled: no arrival
    ]
    offsets = pd.DataFrame(samples, columns=["sampled_at", "topic", "partition", "lso"])
    copies = pd.DataFrame(
        {
            "topic": rng.choice(["a", "bb"], 300),
            "partition": rng.integers(0, 3, 300),
            "offset": rng.integers(0, 220, 300),
        }
    )
    when, width = copy_arrivals(copies, offsets)
    series = arrivals(offsets)
    for i, (topic, partition, offset) in enumerate(copies.itertuples(index=False)):
        found = series.get((topic, int(partition)))
        if found is None:
            assert np.isnan(when[i]) and np.isnan(width[i])
            continue
        at, resolution, _ = found.readable_at(
            np.array([offset]), np.array([np.iinfo(np.int64).max])
        )
        assert np.allclose([when[i], width[i]], [at[0], resolution[0]], equal_nan=True)
    assert np.isfinite(when).sum() > 100
