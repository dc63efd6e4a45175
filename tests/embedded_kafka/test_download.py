"""Kafka's jars come from Maven Central over HTTPS, checked against the lock, without Maven."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from dgm.util.waiting import wait_until
from embedded_kafka.cluster import EmbeddedCluster
from embedded_kafka.distribution import DistributionError, fetch, resolve_distribution
from embedded_kafka.jar_cache import COMPLETE_MARKER
from embedded_kafka.kafka_jars import BROKER, KAFKA_VERSION, JarSet
from embedded_kafka.maven_central import LockedJar
from lab.topics import create_topic


def local_repository(root: Path, jar: LockedJar, content: bytes) -> str:
    """A Maven repository layout on disk, read through urllib's file:// handler."""
    path = root / jar.path
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    return root.as_uri()


def broker_jars(folder: Path, jar: LockedJar) -> JarSet:
    """The broker's set at dgm's Kafka version, as a lock file in `folder` pinning `jar` alone."""
    lock = folder / "broker.lock"
    lock.write_text(f"{jar.group}:{jar.artifact}:{jar.version} {jar.sha256} {jar.size}\n")
    return JarSet(BROKER, KAFKA_VERSION, lock)


def test_checksum_mismatch_is_refused_and_leaves_nothing_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DGM_CACHE_DIR", str(tmp_path / "cache"))
    content = b"not the jar the lock pins"
    genuine = LockedJar(
        "org.example", "lib", "1.0", hashlib.sha256(b"the real jar").hexdigest(), 12
    )
    repository = local_repository(tmp_path / "repo", genuine, content)
    jars = broker_jars(tmp_path, genuine)
    with pytest.raises(DistributionError) as error:
        fetch(jars, lambda _: None, repository)
    assert "Checksum mismatch" in str(error.value)
    assert genuine.sha256 in str(error.value)
    assert hashlib.sha256(content).hexdigest() in str(error.value)
    assert not jars.root.exists()
    left = [p.name for p in jars.root.parent.rglob("*") if p.is_file()]
    assert left == [f"{jars.root.name}.lock"]  # the inter-process lock, nothing else


def test_verified_jars_land_in_the_cache_with_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DGM_CACHE_DIR", str(tmp_path / "cache"))
    content = b"the real jar"
    jar = LockedJar("org.example", "lib", "1.0", hashlib.sha256(content).hexdigest(), 12)
    said: list[str] = []
    jars = broker_jars(tmp_path, jar)
    distribution = fetch(jars, said.append, local_repository(tmp_path / "repo", jar, content))
    assert (distribution.libs / "lib-1.0.jar").read_bytes() == content
    assert (jars.root / COMPLETE_MARKER).exists()
    assert any("1/1 jars" in line for line in said)
    assert resolve_distribution().origin == "cache"  # the second start downloads nothing


def path_without(program: str, shadow: Path) -> str:
    """PATH with `program` hidden: each folder holding it is replaced by a copy of symlinks."""
    folders = []
    for index, folder in enumerate(os.environ.get("PATH", "").split(os.pathsep)):
        if not (Path(folder) / program).exists():
            folders.append(folder)
            continue
        copy = shadow / str(index)
        copy.mkdir(parents=True)
        for entry in Path(folder).iterdir():
            if entry.name != program:
                (copy / entry.name).symlink_to(entry)
        folders.append(str(copy))
    return os.pathsep.join(folders)


@pytest.mark.integration  # it starts a broker of its own
@pytest.mark.slow
def test_a_broker_starts_from_jars_fetched_from_maven_central_without_maven(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", path_without("mvn", tmp_path / "bin"))
    monkeypatch.setenv("DGM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KAFKA_HOME", raising=False)
    monkeypatch.delenv("DGM_MAVEN_REPOSITORY", raising=False)
    assert shutil.which("mvn") is None and shutil.which("java") is not None
    said: list[str] = []
    distribution = resolve_distribution(progress=said.append)
    assert distribution.origin == "Maven Central"
    assert distribution.version == KAFKA_VERSION
    pinned = JarSet.pinned(BROKER).jars()
    assert sorted(p.name for p in distribution.libs.iterdir()) == sorted(
        jar.file_name for jar in pinned
    )
    assert any(f"{len(pinned)}/{len(pinned)} jars" in line for line in said)
    cluster = EmbeddedCluster(tmp_path / "state", brokers=1, die_with_parent=True)
    cluster.start(distribution=distribution, fresh=True)
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        create_topic(admin, "fetched", 1, 1)
        delivered: list[object] = []
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
        producer.produce("fetched", b"hello", on_delivery=lambda err, _: delivered.append(err))
        assert producer.flush(30) == 0
        assert delivered == [None]
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "fetched",
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition("fetched", 0, 0)])
        got: list[bytes] = []

        def read_one() -> bool:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.append(message.value() or b"")
            return bool(got)

        try:
            wait_until(read_one, timeout=60, what="the record produced to the fetched broker")
        finally:
            consumer.close()
        assert got == [b"hello"]
    finally:
        cluster.stop()
