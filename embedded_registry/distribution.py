"""Apicurio Registry's runnable distribution: pinned in a lock file, fetched and unpacked once.

The lock file (`locks/apicurio-registry-<version>.lock`) has embedded_kafka's format
(maven_central.parse_lock: group:artifact:version, SHA-256, size); the file it pins is the
artifact's `-all.zip`, the Quarkus application with its lib/ folder. It is downloaded and
checked with embedded_kafka's code, then unpacked into `<user cache>/apicurio-registry/
<version>/app`, whole or not at all (embedded_kafka.jar_cache), so every test run, CI run and
demo runs the same registry. The archive itself is not kept: its checksum was checked before
a byte of it was unpacked.
"""

from __future__ import annotations

import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from embedded_kafka.jar_cache import COMPLETE_MARKER, cache_dir, locked, replace_whole
from embedded_kafka.maven_central import (
    DownloadError,
    LockedJar,
    fetch_all,
    parse_lock,
    repository_url,
)

APICURIO_VERSION = "3.0.9"
NAME = "apicurio-registry"
CLASSIFIER = "all"
LOCKS = "locks"

Progress = Callable[[str], None]


class DistributionArchive(LockedJar):
    """A pinned `<artifact>-<version>-all.zip`: where LockedJar names a jar, this names the
    archive, so embedded_kafka's download and checksum code fetches it unchanged."""

    __slots__ = ()

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}-{CLASSIFIER}.zip"


@dataclass(frozen=True)
class RegistryDistribution:
    """One pinned Apicurio Registry version."""

    version: str
    lock: Path

    @classmethod
    def pinned(cls, version: str = APICURIO_VERSION) -> RegistryDistribution:
        lock_file = resources.files("embedded_registry").joinpath(LOCKS, f"{NAME}-{version}.lock")
        lock = Path(str(lock_file))
        if not lock.is_file():
            raise DownloadError(f"dgm pins no Apicurio Registry {version}")
        return cls(version, lock)

    @property
    def root(self) -> Path:
        """`<user cache>/apicurio-registry/<version>`: `app/` and, once complete, the marker."""
        return cache_dir(NAME, self.version)

    @property
    def app(self) -> Path:
        return self.root / "app"

    def archive(self) -> DistributionArchive:
        pinned = parse_lock(self.lock.read_text(), str(self.lock))
        if len(pinned) != 1:
            raise DownloadError(f"{self.lock}: expected one archive, found {len(pinned)}")
        return DistributionArchive(*pinned[0])

    def runner_jar(self) -> Path:
        archive = self.archive()
        return self.app / f"{archive.artifact}-{archive.version}-runner.jar"

    def fetch(self, progress: Progress, repository: str | None = None) -> Path:
        """The runner jar, from the cache or downloaded, verified and unpacked once
        (DownloadError naming the lock file if that fails)."""
        root = self.root
        if (root / COMPLETE_MARKER).exists():
            return self.runner_jar()
        with locked(root):
            if (root / COMPLETE_MARKER).exists():  # another process finished while we waited
                return self.runner_jar()
            archive = self.archive()
            progress(
                f"Fetching Apicurio Registry {self.version} ({archive.size / 2**20:.0f} MB) "
                f"from {repository or repository_url()} into {root} (first run only)..."
            )
            try:
                replace_whole(  # the cache appears whole or not at all
                    root,
                    self.version,
                    lambda staging: _fill(staging, archive, progress, repository),
                )
            except DownloadError as error:
                raise DownloadError(f"{error} (pinned in {self.lock})") from error
            progress(f"Apicurio Registry {self.version} ready in {self.app}")
            return self.runner_jar()


def _fill(
    staging: Path, archive: DistributionArchive, progress: Progress, repository: str | None
) -> None:
    download = staging / "download"
    fetch_all([archive], download, progress, repository)  # checked against the SHA-256
    try:
        with zipfile.ZipFile(download / archive.file_name) as opened:
            opened.extractall(staging / "app")  # zipfile keeps every member inside the folder
    except zipfile.BadZipFile as error:
        raise DownloadError(f"{archive.file_name}: not a zip archive: {error}") from error
    shutil.rmtree(download)
    runner = staging / "app" / f"{archive.artifact}-{archive.version}-runner.jar"
    if not runner.is_file():
        raise DownloadError(f"{archive.file_name} holds no {runner.name}")
