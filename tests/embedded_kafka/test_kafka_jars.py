"""Kafka's jar sets: one lock file per set and Kafka version, resolved by name and version."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedded_kafka.kafka_jars import (
    BROKER,
    KAFKA_VERSION,
    MIRROR,
    MIRROR_VERSION,
    STREAMS,
    JarSet,
)
from embedded_kafka.maven_central import DownloadError
from embedded_kafka.versions import SUPPORTED


@pytest.mark.parametrize(
    ("name", "version"),
    [(BROKER, KAFKA_VERSION), (STREAMS, KAFKA_VERSION), (MIRROR, MIRROR_VERSION)],
)
def test_every_set_is_pinned_at_its_kafka_version(name: str, version: str) -> None:
    jars = JarSet.pinned(name, version).jars()
    kafka = [jar for jar in jars if jar.group == "org.apache.kafka"]
    assert kafka and all(jar.version == version for jar in kafka)
    assert all(len(jar.sha256) == 64 and jar.size > 0 for jar in jars)


def test_every_lock_file_is_a_known_set() -> None:
    """The broker's set at each supported version, Kafka Streams' at dgm's default and
    MirrorMaker 2's at the version it runs on (a supported one)."""
    locks = Path(JarSet.pinned(BROKER).lock).parent
    assert MIRROR_VERSION in SUPPORTED
    assert sorted(p.name for p in locks.glob("*.lock")) == sorted(
        {f"{STREAMS}-{KAFKA_VERSION}.lock", f"{MIRROR}-{MIRROR_VERSION}.lock"}
        | {f"{BROKER}-{version}.lock" for version in SUPPORTED}
    )


def test_a_version_pinned_nowhere_is_refused() -> None:
    with pytest.raises(DownloadError) as error:
        JarSet.pinned(BROKER, "0.0.1")
    assert "no jars of kafka for Kafka 0.0.1" in str(error.value)


def test_each_set_and_version_has_its_own_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DGM_CACHE_DIR", str(tmp_path))
    assert JarSet.pinned(STREAMS).root == tmp_path / "kafka-streams" / KAFKA_VERSION
    assert JarSet(BROKER, "3.9.1", tmp_path / "x.lock").root == tmp_path / "kafka" / "3.9.1"


def test_a_bad_lock_line_is_named(tmp_path: Path) -> None:
    lock = tmp_path / "bad.lock"
    lock.write_text("# a comment\norg.example:lib 1234\n")
    with pytest.raises(DownloadError) as error:
        JarSet(BROKER, KAFKA_VERSION, lock).jars()
    assert f"{lock} line 2: cannot read" in str(error.value)
