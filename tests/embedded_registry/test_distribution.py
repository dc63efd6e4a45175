"""Apicurio Registry's distribution comes from Maven Central as one pinned archive, checked
against its SHA-256 before a byte of it is unpacked, and unpacked once into the cache."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from embedded_kafka.jar_cache import COMPLETE_MARKER
from embedded_kafka.maven_central import DownloadError
from embedded_registry.distribution import (
    APICURIO_VERSION,
    DistributionArchive,
    RegistryDistribution,
)

RUNNER = "apicurio-registry-app-9.9.9-runner.jar"


def archive_bytes() -> bytes:
    """A small archive laid out like the real one: the runner jar and its lib/ folder."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(RUNNER, b"runner")
        archive.writestr("lib/io.example.lib-1.0.jar", b"lib")
    return buffer.getvalue()


def pinned(folder: Path, sha256: str, size: int) -> RegistryDistribution:
    lock = folder / "registry.lock"
    lock.write_text(f"io.apicurio:apicurio-registry-app:9.9.9 {sha256} {size}\n")
    return RegistryDistribution("9.9.9", lock)


def repository(root: Path, distribution: RegistryDistribution, content: bytes) -> str:
    """A Maven repository layout on disk, read through urllib's file:// handler."""
    path = root / distribution.archive().path
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    return root.as_uri()


def test_the_pinned_version_names_one_archive() -> None:
    archive = RegistryDistribution.pinned().archive()
    assert isinstance(archive, DistributionArchive)
    assert (archive.group, archive.artifact, archive.version) == (
        "io.apicurio",
        "apicurio-registry-app",
        APICURIO_VERSION,
    )
    assert archive.path.endswith(f"/{APICURIO_VERSION}/apicurio-registry-app-3.0.9-all.zip")
    assert len(archive.sha256) == 64 and archive.size > 50_000_000


def test_an_archive_whose_checksum_differs_is_refused_and_nothing_is_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DGM_CACHE_DIR", str(tmp_path / "cache"))
    genuine = archive_bytes()
    distribution = pinned(tmp_path, hashlib.sha256(genuine).hexdigest(), len(genuine))
    altered = genuine + b"\0"
    with pytest.raises(DownloadError) as refused:
        distribution.fetch(lambda _: None, repository(tmp_path / "repo", distribution, altered))
    assert "Checksum mismatch" in str(refused.value)
    assert hashlib.sha256(altered).hexdigest() in str(refused.value)
    assert str(distribution.lock) in str(refused.value)
    assert not distribution.root.exists()
    left = [p.name for p in distribution.root.parent.rglob("*") if p.is_file()]
    assert left == [f"{distribution.root.name}.lock"]  # the inter-process lock, nothing else


def test_a_verified_archive_is_unpacked_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DGM_CACHE_DIR", str(tmp_path / "cache"))
    content = archive_bytes()
    distribution = pinned(tmp_path, hashlib.sha256(content).hexdigest(), len(content))
    said: list[str] = []
    runner = distribution.fetch(said.append, repository(tmp_path / "repo", distribution, content))
    assert runner == distribution.app / RUNNER and runner.read_bytes() == b"runner"
    assert (distribution.app / "lib" / "io.example.lib-1.0.jar").read_bytes() == b"lib"
    assert (distribution.root / COMPLETE_MARKER).exists()
    assert not (distribution.root / "download").exists()  # the archive is not kept
    assert any("Fetching Apicurio Registry 9.9.9" in line for line in said)
    # The second start downloads nothing: the repository may be gone.
    assert distribution.fetch(said.append, (tmp_path / "gone").as_uri()) == runner


def test_an_archive_without_the_runner_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DGM_CACHE_DIR", str(tmp_path / "cache"))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("lib/only.jar", b"lib")
    content = buffer.getvalue()
    distribution = pinned(tmp_path, hashlib.sha256(content).hexdigest(), len(content))
    with pytest.raises(DownloadError, match=f"holds no {RUNNER}"):
        distribution.fetch(lambda _: None, repository(tmp_path / "repo", distribution, content))
    assert not distribution.root.exists()
