"""The exporter over a hand-made publication (tests/support/published_world/): every family,
values read at each scrape, the health series without a publication, and the JSON API's
answers and errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from dgm import __version__
from dgm.contracts import published
from dgm.contracts.published import PUBLISHED_FILE, open_read_only
from exporter.families import FAMILIES, HEALTH, served_names
from tests.support.exporter_serving import by, get, get_json, scrape, serving, single
from tests.support.published_world.exporter_tables import build, minute


@pytest.fixture(scope="module")
def _published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    state_dir = tmp_path_factory.mktemp("exporter-published")
    build(state_dir, now=minute())
    return state_dir


@pytest.fixture
def state_dir(_published: Path) -> Path:
    """The module's hand-made publication, built once and only read: the test that publishes
    again builds its own."""
    return _published


def test_every_family_is_served_with_its_help(state_dir: Path) -> None:
    with serving(state_dir) as base:
        scraped = scrape(base)
        _, _, body = get(f"{base}/metrics")
    # The hand-made publication has every kind of row, but no collector samples.
    sample_families = {"dgm_last_sample_timestamp_seconds", "dgm_last_sample_age_seconds"}
    assert set(scraped) == served_names() - sample_families
    for family in FAMILIES:
        if family.name in scraped:
            assert f"# HELP {family.name} {family.doc}" in body.decode()
            for labels in scraped[family.name]:
                assert [name for name, _ in labels] == sorted(family.labels), family.name


def test_values_are_the_published_ones(state_dir: Path) -> None:
    with serving(state_dir) as base:
        scraped = scrape(base)
    assert single(scraped, "dgm_publication_up") == 1
    assert by(scraped, "dgm_pipeline_meets_declared", "pipeline") == {
        "orders-alo": 1,
        "payments-eos": 0,
    }  # audit-trail: insufficient evidence, no series
    assert by(scraped, "dgm_pipeline_truncated_records", "pipeline")["payments-eos"] == 2
    assert by(scraped, "dgm_topic_inconsistent_offsets", "topic_name")["payments-ledger"] == 1
    assert by(scraped, "dgm_pipeline_lost_records", "pipeline") == {
        "orders-alo": 0,
        "payments-eos": 5,
        "audit-trail": 0,
    }
    # payments-eos: one torn commit among its losses, its source producer and its sink out
    # of order (minutes ago: nothing in the last closed window).
    served = {
        name: by(scraped, f"dgm_pipeline_{name}", "pipeline")["payments-eos"]
        for name in (
            "torn_commit_records",
            "producer_out_of_order_records",
            "sink_out_of_order_records",
            "last_window_producer_out_of_order_records",
        )
    }
    assert list(served.values()) == [1, 2, 1, 0]
    # orders-alo keeps 1 in 10 ids: its ratios come with their 95% intervals; the others
    # count every id, so their intervals are their ratios.
    one_in = by(scraped, "dgm_pipeline_sampled_ids_one_in", "pipeline")
    assert one_in == {"orders-alo": 10, "payments-eos": 1, "audit-trail": 1}
    loss = {
        end: by(scraped, f"dgm_pipeline_loss_ratio{end}", "pipeline")
        for end in ("_low", "", "_high")
    }
    assert loss["_low"]["orders-alo"] == 0 < loss["_high"]["orders-alo"] < 0.01
    assert loss["_low"]["payments-eos"] == loss[""]["payments-eos"] == loss["_high"]["payments-eos"]
    topics = by(scraped, "dgm_topic_out_of_order_records", "topic_name")
    assert (topics["payments"], topics["payments-ledger"], topics["orders"]) == (2, 1, 0)
    # The hanging transaction pins the LSO of payments-ledger partition 1.
    lag = scraped["dgm_partition_lso_lag"]
    at = (("cluster", "default"), ("partition_id", "1"), ("topic_name", "payments-ledger"))
    assert lag[at] == 480
    assert by(scraped, "dgm_topic_max_lso_lag", "topic_name")["payments-ledger"] == 480
    assert by(scraped, "dgm_hanging_transactions", "topic_name") == {"payments-ledger": 1}
    assert by(scraped, "dgm_open_transactions", "topic_name") == {"payments-ledger": 2}
    hw = by(scraped, "dgm_consumer_group_lag_from_hw", "group_id")
    lso = by(scraped, "dgm_consumer_group_lag_from_lso", "group_id")
    assert hw["ledger-auditor"] > lso["ledger-auditor"]


def test_each_scrape_reads_the_newest_publication(tmp_path: Path) -> None:
    state_dir = tmp_path
    build(state_dir, now=minute())
    with serving(state_dir) as base:
        first = single(scrape(base), "dgm_last_analysis_timestamp_seconds")
        later = datetime.now(UTC) + timedelta(minutes=5)
        build(state_dir, now=later, finished_ago_s=0)  # renamed over the published file
        second = single(scrape(base), "dgm_last_analysis_timestamp_seconds")
    assert second == pytest.approx(later.timestamp(), abs=1e-3)
    assert second > first


def test_without_a_publication_only_health_is_served(tmp_path: Path) -> None:
    with serving(tmp_path) as base:
        scraped = scrape(base)
        status, document = get_json(f"{base}/api/v1/verdicts")
    assert set(scraped) <= {family.name for family in HEALTH}
    assert single(scraped, "dgm_publication_up") == 0
    assert by(scraped, "dgm_build_info", "version")
    assert status == 503 and "no analysis published yet" in document["error"]


def test_an_unreadable_publication_is_up_0_not_an_error(tmp_path: Path) -> None:
    (tmp_path / PUBLISHED_FILE).write_text("not a DuckDB file")
    with serving(tmp_path) as base:
        assert single(scrape(base), "dgm_publication_up") == 0
        status, document = get_json(f"{base}/api/v1/pipelines/x")
    assert status == 503 and "cannot read" in document["error"]


def test_healthz_answers_whatever_the_publication_is(state_dir: Path, tmp_path: Path) -> None:
    """Liveness for health checks: ok with a publication, without one, and with a damaged
    one (those are /metrics' news, not the exporter's ill health)."""
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / PUBLISHED_FILE).write_text("not a DuckDB file")
    for directory in (state_dir, tmp_path / "empty", damaged):
        with serving(directory) as base:
            status, document = get_json(f"{base}/healthz")
            _, _, index = get(f"{base}/")
        assert (status, document["status"]) == (200, "ok"), directory
        assert document["version"] == __version__
        assert b"/healthz" in index


def test_pipeline_endpoint(state_dir: Path) -> None:
    with serving(state_dir) as base:
        status, document = get_json(f"{base}/api/v1/pipelines/payments-eos?limit=3")
    assert status == 200
    assert document["verdict"]["pipeline"] == "payments-eos"
    assert document["verdict"]["meets_declared"] is False
    windows = [w["window_start"] for w in document["windows"]]
    assert len(windows) == 3 and windows == sorted(windows, reverse=True)
    assert {w["pipeline"] for w in document["windows"]} == {"payments-eos"}
    assert document["faults"] and {f["pipeline"] for f in document["faults"]} == {"payments-eos"}


def test_duplicates_endpoint_limits_and_filters(state_dir: Path) -> None:
    with duckdb.connect(str(state_dir / PUBLISHED_FILE), read_only=True) as db:
        rows = db.execute(
            "SELECT \"timestamp\" FROM duplicates WHERE topic = 'payments-ledger' "
            'ORDER BY "timestamp"'
        ).fetchall()
    since = rows[len(rows) // 2][0]
    expected = sum(1 for (at,) in rows if at >= since)
    with serving(state_dir) as base:
        _, every = get_json(f"{base}/api/v1/topics/payments-ledger/duplicates")
        _, two = get_json(f"{base}/api/v1/topics/payments-ledger/duplicates?limit=2")
        query = f"since={since.astimezone(UTC).isoformat().replace('+00:00', 'Z')}"
        _, recent = get_json(f"{base}/api/v1/topics/payments-ledger/duplicates?{query}")
        _, none = get_json(f"{base}/api/v1/topics/orders/duplicates")
    assert len(every["duplicates"]) == len(rows)
    assert two["duplicates"] == every["duplicates"][:2]  # newest first
    assert len(recent["duplicates"]) == expected < len(rows)
    assert none["duplicates"] == []  # a known topic without duplicates


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/api/v1/pipelines/nope", 404, "no pipeline 'nope'"),
        ("/api/v1/topics/nope/duplicates", 404, "no topic 'nope'"),
        ("/api/v1/nothing", 404, "no such endpoint"),
        ("/elsewhere", 404, "no such endpoint"),
        ("/api/v1/topics/orders/duplicates?limit=0", 400, "limit: expected 1..100000"),
        ("/api/v1/topics/orders/duplicates?limit=ten", 400, "limit: expected an integer"),
        ("/api/v1/topics/orders/duplicates?since=yesterday", 400, "since: expected an ISO"),
        ("/api/v1/topics/orders/duplicates?order=asc", 400, "unknown parameter order"),
        ("/api/v1/pipelines/orders-alo?limit=1&limit=2", 400, "more than once: limit"),
        ("/api/v1/verdicts?limit=1", 400, "unknown parameter limit"),
    ],
)
def test_errors_are_json_with_their_status(
    state_dir: Path, path: str, status: int, says: str
) -> None:
    with serving(state_dir) as base:
        got, document = get_json(f"{base}{path}")
    assert got == status and says in document["error"], document


def test_group_status_is_one_series_per_group_with_its_word_beside(state_dir: Path) -> None:
    with open_read_only(published.published_path(state_dir)) as db:
        rows = db.execute(
            "SELECT group_id, status, severity FROM group_status WHERE topic IS NULL"
        ).fetchall()
    with serving(state_dir) as base:
        scraped = scrape(base)
    assert rows
    assert by(scraped, "dgm_consumer_group_status", "group_id") == {
        group: float(severity) for group, _, severity in rows
    }
    info = {
        dict(labels)["group_id"]: dict(labels)["status"]
        for labels in scraped["dgm_consumer_group_status_info"]
    }
    assert info == {group: status for group, status, _ in rows}


def test_each_group_says_its_type_and_each_pipeline_its_duplicates_by_cause(
    state_dir: Path,
) -> None:
    with open_read_only(published.published_path(state_dir)) as db:
        groups = db.execute(
            "SELECT DISTINCT group_id, group_type, group_state FROM latest_group_lag"
        ).fetchall()
        causes = db.execute(
            "SELECT pipeline, cause, count(*) FROM duplicates WHERE is_extra_copy "
            "GROUP BY pipeline, cause"
        ).fetchall()
    with serving(state_dir) as base:
        scraped = scrape(base)
    assert groups and causes
    info = {
        (d["group_id"], d["type"], d["state"])
        for d in (dict(labels) for labels in scraped["dgm_consumer_group_info"])
    }
    assert info == set(groups)
    served = {
        (dict(labels)["pipeline"], dict(labels)["cause"]): value
        for labels, value in scraped["dgm_pipeline_duplicate_records_by_cause"].items()
    }
    assert served == {(p, c): float(n) for p, c, n in causes}
