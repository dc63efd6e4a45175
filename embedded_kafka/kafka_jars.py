"""Apache Kafka's jars, by set and Kafka version: pinned in a lock file, fetched once.

A set is named like its folder in the user cache: `kafka` (the broker and its tools),
`kafka-streams` (a Kafka Streams application), `connect-mirror` (what MirrorMaker 2 needs
beyond the broker's jars). Its lock file, `locks/<set>-<Kafka version>.lock` in this package,
lists each jar's group:artifact:version, SHA-256 and size (maven_central.parse_lock). The jars
are fetched from Maven Central over HTTPS (no Maven) once, into `<user cache>/<set>/<version>/
libs`, whole or not at all (jar_cache), so every test run, CI run and demo runs the same Kafka.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import NamedTuple

from embedded_kafka.jar_cache import COMPLETE_MARKER, cache_dir, locked, replace_whole
from embedded_kafka.maven_central import (
    DownloadError,
    LockedJar,
    fetch_all,
    parse_lock,
    repository_url,
)

# dgm's default Kafka version: the broker's unless another supported one is asked for
# (embedded_kafka.versions), and the lab's Kafka Streams'.
KAFKA_VERSION = "4.4.0"
# The lab's MirrorMaker 2 runs on its own Kafka's jars (the broker's set of that version and
# the connect-mirror set): Maven Central as this project reaches it serves connect-mirror up
# to 4.3.1 and no 4.4.0, and a MirrorMaker's clients talk to every supported broker.
MIRROR_VERSION = "4.1.1"
BROKER = "kafka"
STREAMS = "kafka-streams"
MIRROR = "connect-mirror"
# How progress lines name each set.
TITLES = {BROKER: "Apache Kafka", STREAMS: "Kafka Streams", MIRROR: "connect-mirror"}
LOCKS = "locks"

Progress = Callable[[str], None]


class Fetched(NamedTuple):
    libs: Path  # holds exactly the set's jars
    downloaded: bool  # False: they were in the cache already


@dataclass(frozen=True)
class JarSet:
    """One set of jars at one Kafka version, as its lock file pins them."""

    name: str  # also its folder in the user cache
    version: str  # Kafka's
    lock: Path

    @classmethod
    def pinned(cls, name: str, version: str = KAFKA_VERSION) -> JarSet:
        """The set as this package pins it; DownloadError if it pins no such set."""
        lock = Path(
            str(resources.files("embedded_kafka").joinpath(LOCKS, f"{name}-{version}.lock"))
        )
        if not lock.is_file():
            raise DownloadError(f"dgm pins no jars of {name} for Kafka {version}")
        return cls(name, version, lock)

    @property
    def title(self) -> str:
        return f"{TITLES.get(self.name, self.name)} {self.version}"

    @property
    def root(self) -> Path:
        """`<user cache>/<name>/<version>`: `libs/` and, once complete, the marker."""
        return cache_dir(self.name, self.version)

    def jars(self) -> tuple[LockedJar, ...]:
        return parse_lock(self.lock.read_text(), str(self.lock))

    def fetch(self, progress: Progress, repository: str | None = None) -> Fetched:
        """The jars from the cache, else downloaded and verified once (DownloadError naming
        the lock file if that fails). `repository`: Maven Central's, or DGM_MAVEN_REPOSITORY."""
        root = self.root
        if (root / COMPLETE_MARKER).exists():
            return Fetched(root / "libs", downloaded=False)
        with locked(root):
            if (root / COMPLETE_MARKER).exists():  # another process finished while we waited
                return Fetched(root / "libs", downloaded=False)
            jars = self.jars()
            megabytes = sum(jar.size for jar in jars) / (1024 * 1024)
            progress(
                f"Fetching {self.title} ({len(jars)} jars, {megabytes:.0f} MB) from "
                f"{repository or repository_url()} into {root} (first run only)..."
            )
            try:
                replace_whole(  # the cache appears whole or not at all
                    root,
                    self.version,
                    lambda staging: fetch_all(jars, staging / "libs", progress, repository),
                )
            except DownloadError as error:
                raise DownloadError(f"{error} (jars pinned in {self.lock})") from error
            progress(f"{self.title} ready: {len(jars)} jars in {root / 'libs'}")
            return Fetched(root / "libs", downloaded=True)
