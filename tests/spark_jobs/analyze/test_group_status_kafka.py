"""Consumer-group status on a real broker: one group driven into each state by real consumers,
producers and the admin API, sampled by the real collector cycle after cycle, judged by the
real analysis (analyze()'s group_status frame), published, and read back as the alert metric.

One world for the module: every group is driven at once, step after step, and the collector
samples all of them after each step; each test then checks one group.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from streamlit.testing.v1 import AppTest

from alerts.metrics import read_values
from collectors.clients import Clients
from collectors.cycle import Collector
from dgm.config.alerts import AlertRule
from dgm.config.analysis import AnalysisSettings
from dgm.config.collectors import CollectorSettings
from dgm.config.document import DgmConfig
from dgm.contracts.published import open_read_only, published_path
from dgm.contracts.samples import SampleStore
from dgm.contracts.vocabulary import GroupStatus
from dgm.util.waiting import wait_until
from spark_jobs.analysis_input import Fingerprints
from spark_jobs.analyze.analysis import analyze
from spark_jobs.analyze.publish import publish
from spark_jobs.analyze.samples import read_samples
from spark_jobs.schemas import FINGERPRINT
from tests.support.dashboard_app import APP, markdown, no_exception, page
from tests.support.transactional import in_transaction, send, transactional_producer

WINDOW = 4  # samples judged
STEPS = WINDOW + 2  # collector cycles after the set-up
REWIND_AT = STEPS - 2  # the step whose sample first sees the rewind
GROUPS = ("ok", "warn", "err", "stop", "stall", "rewind", "txn")


def consumer(kafka: Any, group: str, topic: str, **extra: Any) -> Consumer:
    """A member of `group` subscribed to `topic` (assigned once it polls: see `take`)."""
    member = Consumer(
        kafka.client_config(
            **{"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"},
            **extra,
        )
    )
    member.subscribe([topic])
    return member


def take(member: Consumer, count: int) -> int:
    """Consume `count` records (so the member is assigned); the offset after the last."""
    got: list[int] = []

    def more() -> bool:
        message = member.poll(0.2)
        offset = None if message is None or message.error() else message.offset()
        if offset is not None:
            got.append(offset)
        return len(got) >= count

    wait_until(more, 30, f"{count} records")
    return got[-1] + 1


def commit(member: Consumer, topic: str, offset: int) -> None:
    member.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)


@dataclass
class World:
    rows: dict[tuple[str, str | None], dict[str, Any]]  # (group name, topic or None) -> row
    severities: dict[str, float]  # the group_status alert metric, by group name
    topics: dict[str, str]
    groups: dict[str, str]
    state_dir: Path

    def partition(self, name: str) -> dict[str, Any]:
        return self.rows[(name, self.topics[name])]

    def group(self, name: str) -> dict[str, Any]:
        return self.rows[(name, None)]


@pytest.fixture(scope="module")
def world(kafka: Any, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    prefix = f"gs-{uuid.uuid4().hex[:8]}"
    topics = {name: kafka.new_topic(f"{prefix}-{name}") for name in GROUPS}
    groups = {name: f"{prefix}-{name}" for name in GROUPS}
    state_dir = tmp_path_factory.mktemp("group-status")
    settings = CollectorSettings(interval_s=1, include_topics=(f"^{prefix}-",))
    clients = Clients(kafka.client_config(), request_timeout_s=10)
    collector = Collector(clients, settings, SampleStore(state_dir), request_timeout_s=10)
    producer = Producer(kafka.client_config())
    members: list[Consumer] = []
    open_txn = transactional_producer(kafka, **{"transaction.timeout.ms": 600_000})
    behind = transactional_producer(kafka)
    try:
        # Stopped consumers: each read and committed, then left its group.
        for name, produced, read in (("err", 10, 10), ("stop", 20, 10), ("rewind", 10, 10)):
            send(producer, topics[name], produced)
            gone = consumer(kafka, groups[name], topics[name])
            commit(gone, topics[name], take(gone, read))
            gone.close()
        # Stalled: a member that keeps committing offset 5 of 20.
        send(producer, topics["stall"], 20)
        stall = consumer(kafka, groups["stall"], topics["stall"])
        members.append(stall)
        take(stall, 1)  # assigned, and stuck on its record 5 from now on
        # Caught up to an LSO an open transaction pins: 0-4 committed, marker 5, open 6-8.
        open_txn.begin_transaction()
        send(open_txn, topics["txn"], 5)
        open_txn.commit_transaction(30)
        txn = consumer(kafka, groups["txn"], topics["txn"], **{"isolation.level": "read_committed"})
        members.append(txn)
        take(txn, 5)
        in_transaction(open_txn, topics["txn"], 3)
        ok = consumer(kafka, groups["ok"], topics["ok"])
        warn = consumer(kafka, groups["warn"], topics["warn"])
        members += [ok, warn]
        ok_read = 0
        for step in range(STEPS):
            for name in ("ok", "warn", "err", "stall"):  # producers keep writing
                send(producer, topics[name], 10)
            ok_read = take(ok, 10)
            commit(ok, topics["ok"], ok_read)  # all of it: lag 0
            commit(warn, topics["warn"], take(warn, 3))  # 3 of every 10: lag grows
            stall.poll(0)  # alive in its group
            commit(stall, topics["stall"], 5)  # the same offset again
            # The LSO stays at 6 (the open transaction); committed records pile up past it.
            behind.begin_transaction()
            send(behind, topics["txn"], 2)
            behind.commit_transaction(30)
            txn.poll(0.2)  # nothing: the committed records sit past the LSO
            # Its position: all a read_committed consumer can read.
            (position,) = txn.position([TopicPartition(topics["txn"], 0)])
            commit(txn, topics["txn"], position.offset)
            if step == REWIND_AT:
                reset = ConsumerGroupTopicPartitions(
                    groups["rewind"], [TopicPartition(topics["rewind"], 0, 2)]
                )
                for future in kafka.admin().alter_consumer_group_offsets([reset]).values():
                    future.result(30)
            assert collector.cycle() is not None
        config = DgmConfig(analysis=AnalysisSettings(group_status_window=WINDOW))
        fingerprints = spark.createDataFrame([], FINGERPRINT)
        frames = analyze(spark, config, Fingerprints(fingerprints), read_samples(state_dir), now())
        publish({t: frames[t] for t in ("group_status", "group_lag")}, state_dir)
        with open_read_only(published_path(state_dir)) as db:
            cursor = db.execute("SELECT * FROM group_status")
            names = [d[0] for d in cursor.description]
            found = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        by_group = {group: name for name, group in groups.items()}
        rule = AlertRule(
            name="status", metric="group_status", scope=f"group:{prefix}-*", threshold=0
        )
        values = read_values(state_dir, [rule], now())["status"]
        assert isinstance(values, dict), values
        yield World(
            rows={(by_group[r["group_id"]], r["topic"]): r for r in found},
            severities={by_group[g]: v for g, v in values.items()},
            topics=topics,
            groups=groups,
            state_dir=state_dir,
        )
    finally:
        for member in members:
            member.close()
        with contextlib.suppress(KafkaException):
            open_txn.abort_transaction(30)
        clients.close()


def now() -> datetime:
    return datetime.now(UTC)


def test_a_consumer_that_keeps_up_is_ok(world: World) -> None:
    row = world.partition("ok")
    assert (row["status"], row["lso_lag_end"], row["samples"]) == (GroupStatus.OK, 0, WINDOW)
    assert row["committed_end"] - row["committed_start"] == 10 * (WINDOW - 1)
    assert world.group("ok")["status"] == GroupStatus.OK and world.severities["ok"] == 0


def test_a_consumer_falling_behind_warns(world: World) -> None:
    row = world.partition("warn")
    assert row["status"] == GroupStatus.WARN, row["reason"]
    # 10 produced and 3 committed per step: lag from the LSO grows by 7 a sample.
    assert row["lso_lag_end"] - row["lso_lag_start"] == 7 * (WINDOW - 1)
    assert row["member_id"] is not None
    assert world.severities["warn"] == GroupStatus.WARN.severity


def test_a_consumer_stopped_while_producers_write_is_an_error(world: World) -> None:
    row = world.partition("err")
    assert row["status"] == GroupStatus.ERR, row["reason"]
    assert row["committed_start"] == row["committed_end"] == 10
    assert row["lso_lag_end"] - row["lso_lag_start"] == 10 * (WINDOW - 1)
    assert row["member_id"] is None and row["group_state"] == "Empty"
    assert row["last_commit_at"] <= row["window_start"]
    assert world.severities["err"] == GroupStatus.ERR.severity


def test_a_consumer_stopped_with_lag_is_stopped(world: World) -> None:
    row = world.partition("stop")
    assert row["status"] == GroupStatus.STOP, row["reason"]
    assert (row["committed_end"], row["lso_lag_start"], row["lso_lag_end"]) == (10, 10, 10)
    assert world.severities["stop"] == GroupStatus.STOP.severity


def test_a_member_committing_the_same_offset_with_lag_is_stalled(world: World) -> None:
    row = world.partition("stall")
    assert row["status"] == GroupStatus.STALL, row["reason"]
    assert row["committed_start"] == row["committed_end"] == 5
    assert row["lso_lag_end"] > 0 and row["member_id"] is not None
    assert world.severities["stall"] == GroupStatus.STALL.severity


def test_an_offset_reset_backwards_is_a_rewind(world: World) -> None:
    row = world.partition("rewind")
    assert row["status"] == GroupStatus.REWIND, row["reason"]
    assert (row["committed_start"], row["committed_end"]) == (10, 2)
    assert (row["lso_lag_start"], row["lso_lag_end"]) == (0, 8)
    assert world.group("rewind")["status"] == GroupStatus.REWIND
    assert world.severities["rewind"] == GroupStatus.REWIND.severity


def test_an_open_transaction_pinning_the_lso_is_not_a_stall(world: World) -> None:
    row = world.partition("txn")
    assert row["status"] == GroupStatus.OK, row["reason"]
    assert (row["committed_end"], row["lso_lag_end"]) == (6, 0)
    # From the high watermark: the open transaction's 3 records, and every committed
    # transaction behind it (2 records and a marker per step) count as lag, and it grows.
    assert row["hw_lag_end"] >= 3 + 3 * STEPS
    assert row["status_from_hw"] == GroupStatus.STALL
    assert world.group("txn")["status_from_hw"] == GroupStatus.STALL
    assert world.severities["txn"] == 0


def test_the_groups_page_shows_each_status_and_says_the_lso_is_pinned(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = world.state_dir / "dgm.toml"
    config.write_text('state_dir = "."\n')
    monkeypatch.setenv("DGM_CONFIG", str(config))
    monkeypatch.setenv("DGM_STATE_DIR", str(world.state_dir))
    monkeypatch.setenv("DGM_DASHBOARD_REFRESH_S", "0")
    at = page(AppTest.from_file(str(APP), default_timeout=60), "groups")
    expected = {
        "ok": GroupStatus.OK,
        "warn": GroupStatus.WARN,
        "err": GroupStatus.ERR,
        "stop": GroupStatus.STOP,
        "stall": GroupStatus.STALL,
        "rewind": GroupStatus.REWIND,
        "txn": GroupStatus.OK,
    }
    for name, status in expected.items():
        at.selectbox[0].select(world.groups[name]).run()
        no_exception(at)
        assert any(f'data-status="{status}"' in text for text in markdown(at)), name
        table = next(d.value for d in at.dataframe if "status_from_hw" in d.value.columns)
        assert list(table["status"]) == [status], name
        notes = [str(i.value) for i in at.info]
        pinned = [n for n in notes if "An open transaction pins the LSO" in n]
        if name == "txn":
            assert pinned and "not stalled (by lag from the HW it would look STALL)" in pinned[0]
        else:
            assert not pinned, name
