"""The series an alert can clear on: the last closed window's counts fall back to 0 once the
problem stops (the totals keep it for the retention), the staleness threshold is the one
`dgm verdicts` uses, and exporter.granularity = "topic" drops the per-partition series but
keeps per-topic ones that say the same."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dgm.contracts.published import stale_after_s
from exporter.families import PER_PARTITION
from exporter.snapshot import ScrapeSettings
from tests.support.exporter_serving import Scrape, by, scrape, serving, single
from tests.support.published_rows import publish, verdict
from tests.support.published_world.exporter_tables import build, minute

WINDOW_S = 60
T0 = datetime(2026, 1, 1, tzinfo=UTC)  # a window boundary
PIPELINE = "eos-broken"
SOURCE = "eos-source"


def window(k: int) -> datetime:
    return T0 + timedelta(seconds=k * WINDOW_S)


def publish_run(state_dir: Path, sampled_at: datetime, aborted: dict[int, int]) -> None:
    """One run whose newest sample is `sampled_at`: the pipeline checks 50 records a window
    in windows 0..5, and reads `aborted[k]` records of aborted transactions in window k."""
    windows = range(6)
    rows: dict[str, list[dict[str, Any]]] = {
        "runs": [
            {
                "run_id": "run",
                "started_at": sampled_at - timedelta(seconds=25),
                "finished_at": sampled_at + timedelta(seconds=5),
                "last_sample_at": sampled_at,
                "window_s": WINDOW_S,
            }
        ],
        "verdicts": [
            verdict(
                PIPELINE,
                achieved="no guarantee",
                meets_declared=False,
                records_checked=50 * len(windows),
                aborted_reads=sum(aborted.values()),
                loss_rate=0.0,
            )
        ],
        "pipeline_windows": [
            {
                "pipeline": PIPELINE,
                "window_start": window(k),
                "records_checked": 50,
                "aborted_reads": aborted.get(k, 0),
                "lost": 0,
                "loss_rate": 0.0,
            }
            for k in windows
        ],
        "topic_windows": [
            {"topic": SOURCE, "window_start": None, "records": 60 * len(windows), "aborted": 9},
            *(
                {"topic": SOURCE, "window_start": window(k), "records": 60, "aborted": 3}
                for k in (1, 2, 3)
            ),
        ],
    }
    publish(state_dir, rows)


def test_the_last_window_series_clears_once_aborted_reads_stop(tmp_path: Path) -> None:
    aborted = {1: 4, 2: 2, 3: 3}  # windows 1..3 (T0+60 s to T0+240 s) read aborted records
    seen: list[tuple[float, float, float, float]] = []
    for sampled in (3.5, 4.5, 5.5, 7.5):  # in window 3, 4, 5 and 7
        publish_run(tmp_path, T0 + timedelta(seconds=sampled * WINDOW_S), aborted)
        with serving(tmp_path) as base:
            scraped = scrape(base)
        seen.append(
            (
                single(scraped, "dgm_last_window_start_timestamp_seconds"),
                by(scraped, "dgm_pipeline_last_window_aborted_read_records", "pipeline")[PIPELINE],
                by(scraped, "dgm_topic_last_window_aborted_records", "topic_name")[SOURCE],
                by(scraped, "dgm_pipeline_aborted_read_records", "pipeline")[PIPELINE],
            )
        )
        assert by(scraped, "dgm_pipeline_last_window_checked_records", "pipeline") == {
            PIPELINE: 0 if sampled > 7 else 50  # window 5 is the last with records
        }
    starts = [window(k).timestamp() for k in (2, 3, 4, 6)]
    assert [s[0] for s in seen] == starts  # the window before the sample's own
    assert [s[1] for s in seen] == [2, 3, 0, 0]  # cleared one window after they stopped
    assert [s[2] for s in seen] == [3, 3, 0, 0]
    assert [s[3] for s in seen] == [9, 9, 9, 9]  # the total keeps them for the retention


def test_a_window_without_records_has_counts_0_and_no_ratio(tmp_path: Path) -> None:
    publish_run(tmp_path, T0 + timedelta(seconds=9.5 * WINDOW_S), {1: 4})
    with serving(tmp_path) as base:
        scraped = scrape(base)
    assert by(scraped, "dgm_pipeline_last_window_lost_records", "pipeline") == {PIPELINE: 0}
    assert "dgm_pipeline_last_window_loss_ratio" not in scraped
    assert by(scraped, "dgm_pipeline_loss_ratio", "pipeline") == {PIPELINE: 0}  # the total has one


def test_the_stale_threshold_is_the_one_dgm_verdicts_uses(tmp_path: Path) -> None:
    publish_run(tmp_path, T0, {})  # a run of 30 s
    with serving(tmp_path, ScrapeSettings(interval_s=15)) as base:
        published = single(scrape(base), "dgm_analysis_stale_after_seconds")
    assert published == stale_after_s(15, 30) == 3 * (15 + 30)
    with serving(tmp_path / "nothing-yet", ScrapeSettings(interval_s=5)) as base:
        nothing = single(scrape(base), "dgm_analysis_stale_after_seconds")
    assert nothing == stale_after_s(5) == 60  # at least a minute


def per_topic_max(scraped: Scrape, family: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for labels, value in scraped[family].items():
        topic = dict(labels)["topic_name"]
        found[topic] = max(found.get(topic, value), value)
    return found


def per_group_topic_sum(scraped: Scrape, family: str) -> dict[tuple[str, str], float]:
    found: dict[tuple[str, str], float] = {}
    for labels, value in scraped[family].items():
        key = (dict(labels)["group_id"], dict(labels)["topic_name"])
        found[key] = found.get(key, 0.0) + value
    return found


def group_topic(scraped: Scrape, family: str) -> dict[tuple[str, str], float]:
    return {
        (dict(labels)["group_id"], dict(labels)["topic_name"]): value
        for labels, value in scraped[family].items()
    }


def test_topic_granularity_serves_no_partition_series(tmp_path: Path) -> None:
    build(tmp_path, now=minute())
    with serving(tmp_path) as base:
        partitions = scrape(base)
    with serving(tmp_path, ScrapeSettings(granularity="topic")) as base:
        topics = scrape(base)
    assert all(family.name in partitions for family in PER_PARTITION)
    assert set(topics) == set(partitions) - {family.name for family in PER_PARTITION}
    moving = {"dgm_last_analysis_age_seconds", "dgm_scrape_duration_seconds"}  # per scrape
    for name, values in topics.items():
        assert name in moving or values == partitions[name], name
    # The per-topic series say what the partition ones summed up to.
    assert per_topic_max(partitions, "dgm_partition_lso_lag") == by(
        topics, "dgm_topic_max_lso_lag", "topic_name"
    )
    assert per_topic_max(partitions, "dgm_partition_lso_stuck_seconds") == by(
        topics, "dgm_topic_max_lso_stuck_seconds", "topic_name"
    )
    for suffix in ("hw", "lso"):
        assert per_group_topic_sum(
            partitions, f"dgm_consumer_group_topic_partition_lag_from_{suffix}"
        ) == pytest.approx(group_topic(topics, f"dgm_consumer_group_topic_lag_from_{suffix}"))
