"""A damaged sample file (truncated, or overwritten with junk on disk) is set aside with a
warning naming it, never deleted, and stops no reader: the store, the upkeep and a collector
restoring its state read on without it."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from dgm.contracts.sample_upkeep import keep_bounded
from dgm.contracts.samples import DAMAGED_DIR, latest_rows
from tests.support.sample_files import NOW, NOW_MS, details, event_file, filled


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if how == "truncated" else b"junk" * 50)


@pytest.mark.parametrize("how", ["truncated", "junk"])
def test_a_damaged_file_is_set_aside_and_the_rest_is_read(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    store, before = filled(tmp_path, hours=1, every_s=300)  # 12 files
    victim = store.files("events")[3]
    lost = Counter(store.read("events", [victim]).column("detail").to_pylist())
    damage(victim, how)
    with caplog.at_level(logging.WARNING):
        assert details(store) == before - lost
    assert victim.name in caplog.text and "damaged" in caplog.text
    moved = victim.parent / DAMAGED_DIR / victim.name
    assert moved.exists() and not victim.exists()  # kept for a look, out of every read
    assert len(store.files("events")) == 11


def test_upkeep_and_a_restarting_collector_read_past_a_damaged_file(tmp_path: Path) -> None:
    store, before = filled(tmp_path, hours=2, every_s=60)
    damage(store.files("events")[10], "truncated")
    newest = store.latest("events")
    assert newest is not None
    keep_bounded(store, NOW, retention=timedelta(hours=24), linger_s=0)
    keep_bounded(store, NOW, retention=timedelta(hours=24), linger_s=0)
    assert sum(details(store).values()) == sum(before.values()) - 1
    assert len(list((store.kind_dir("events") / DAMAGED_DIR).iterdir())) == 1
    # The newest file damaged: a collector restores from the newest one that reads.
    event_file(store, NOW_MS + 1000, "last")
    damage(store.latest("events"), "junk")  # type: ignore[arg-type]
    assert [r["detail"] for r in latest_rows(store, "events", "c")] == ["e119"]
