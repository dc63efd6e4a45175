"""Kafka's jars come from Maven Central over HTTPS, checked against the lock, without Maven."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from dgm.waiting import wait_until
from embedded_kafka.cluster import EmbeddedCluster
from embedded_kafka.distribution import (
    COMPLETE_MARKER,
    DistributionError,
    cache_dir,
    download,
    resolve_distribution,
)
from embedded_kafka.maven_central import LockedJar, kafka_jars
from lab.topics import create_topic


def local_repository(root: Path, jar: LockedJar, content: bytes) -> str:
    """A Maven repository layout on disk, read through urllib's file:// handler."""
    path = root / jar.path
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    return root.as_uri()


def test_checksum_mismatch_is_refused_and_leaves_nothing_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DGM_CACHE_DIR", str(tmp_path / "cache"))
    content = b"not the jar the lock pins"
    genuine = LockedJar(
        "org.example", "lib", "1.0", hashlib.sha256(b"the real jar").hexdigest(), 12
    )
    repository = local_repository(tmp_path / "repo", genuine, content)
    with pytest.raises(DistributionError) as error:
        download(cache_dir(), lambda _: None, [genuine], repository)
    assert "Checksum mismatch" in str(error.value)
    assert genuine.sha256 in str(error.value)
    assert hashlib.sha256(content).hexdigest() in str(error.value)
    assert not cache_dir().exists()
    left = [p.name for p in cache_dir().parent.rglob("*") if p.is_file()]
    assert left == [f"{cache_dir().name}.lock"]  # the inter-process lock, nothing else


def test_verified_jars_land_in_the_cache_with_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DGM_CACHE_DIR", str(tmp_path / "cache"))
    content = b"the real jar"
    jar = LockedJar("org.example", "lib", "1.0", hashlib.sha256(content).hexdigest(), 12)
    said: list[str] = []
    distribution = download(
        cache_dir(), said.append, [jar], local_repository(tmp_path / "repo", jar, content)
    )
    assert (distribution.libs / "lib-1.0.jar").read_bytes() == content
    assert (cache_dir() / COMPLETE_MARKER).exists()
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
    assert distribution.version == "4.1.1"
    assert sorted(p.name for p in distribution.libs.iterdir()) == sorted(
        jar.file_name for jar in kafka_jars()
    )
    assert any(f"{len(kafka_jars())}/{len(kafka_jars())} jars" in line for line in said)
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
