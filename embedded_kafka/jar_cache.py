"""A folder of pinned jars in the user cache: fetched once, whole or not at all, one writer.

The one home of that cache for the broker's distribution (embedded_kafka.distribution) and the
lab's Java applications (Kafka Streams, MirrorMaker 2): each names its lock file; the jars are
checked against their SHA-256 by `maven_central.fetch_all`, staged beside the target and
renamed into place with a marker.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from dgm.paths import user_cache_dir
from embedded_kafka.maven_central import DownloadError, LockedJar, fetch_all, parse_lock

COMPLETE_MARKER = ".complete"

Progress = Callable[[str], None]


@contextmanager
def exclusive(lock_path: Path) -> Iterator[None]:
    """Two processes (two test sessions, demo and CI) must not write into one folder at once."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def cache_dir(name: str, version: str) -> Path:
    """`<user cache>/<name>/<version>`: where one pinned version of something is kept."""
    return user_cache_dir() / name / version


@contextmanager
def locked(root: Path) -> Iterator[Path]:
    """`exclusive` on `<root>.lock`, the lock file beside the folder `root`."""
    with exclusive(root.with_name(f"{root.name}.lock")):
        yield root


def replace_whole(target: Path, marker: str, fill: Callable[[Path], None]) -> None:
    """`fill` a staging folder beside `target`, mark it complete (its marker file says
    `marker`) and rename it into place: `target` appears whole or not at all."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        fill(staging)
        (staging / COMPLETE_MARKER).write_text(marker)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def cached_jars(libs: Path, jars: Sequence[LockedJar], what: str, progress: Progress) -> Path:
    """`libs` holding exactly `jars`, downloaded and verified if not there yet. The caller
    holds `exclusive` on a lock beside it. Raises maven_central.DownloadError."""
    if (libs / COMPLETE_MARKER).exists():
        return libs
    progress(f"Fetching {what} ({len(jars)} jars) into {libs}...")
    replace_whole(libs, what, lambda staging: fetch_all(jars, staging, progress))
    return libs


@dataclass(frozen=True)
class PinnedJars:
    """The jars a package pins in its lock file, cached under `<user cache>/<cache_name>/
    <version>/libs`."""

    package: str  # holds the lock file (and whatever else the application ships)
    lock_file: str
    cache_name: str
    version: str
    what: str  # names the jars in progress lines, e.g. "Kafka Streams 4.1.1"

    def resource(self, name: str) -> Path:
        return Path(str(resources.files(self.package).joinpath(name)))

    def jars(self) -> tuple[LockedJar, ...]:
        return parse_lock(self.resource(self.lock_file).read_text())

    def cache_dir(self) -> Path:
        return cache_dir(self.cache_name, self.version)

    def libs(self, root: Path, progress: Progress, error: Callable[[str], Exception]) -> Path:
        """`<root>/libs` holding the jars (the caller holds `locked(root)`); a download that
        fails raises `error` naming the lock file."""
        try:
            return cached_jars(root / "libs", self.jars(), self.what, progress)
        except DownloadError as failed:
            where = f"{self.package.replace('.', '/')}/{self.lock_file}"
            raise error(f"{failed} (jars of {where})") from failed
