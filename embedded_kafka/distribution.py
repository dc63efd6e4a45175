"""Resolve Apache Kafka's jars: KAFKA_HOME, else the user cache, else Maven Central.

Pinned to one Kafka version so that every test run, CI run and demo measures the same broker:
the jars and their SHA-256 are listed in kafka-jars.lock and fetched over HTTPS (no Maven).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dgm.errors import UserFacingError
from embedded_kafka import jar_cache
from embedded_kafka.jar_cache import COMPLETE_MARKER as COMPLETE_MARKER  # callers import it here
from embedded_kafka.jar_cache import locked, replace_whole
from embedded_kafka.java import NO_BROKER_HINT
from embedded_kafka.maven_central import (
    DownloadError,
    LockedJar,
    fetch_all,
    kafka_jars,
    repository_url,
)

KAFKA_VERSION = "4.1.1"
SCALA_VERSION = "2.13"
# Kafka 4 logs through SLF4J 2; the lock pins slf4j-api 2.x (a 1.7 API, which Maven's
# nearest-wins would pick from a transitive dependency, makes the broker silently log nothing).
SLF4J_VERSION = "2.0.17"
LOG4J_VERSION = "2.24.3"

BROKER_MAIN = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"

Progress = Callable[[str], None]


class DistributionError(UserFacingError):
    pass


@dataclass(frozen=True)
class KafkaDistribution:
    libs: Path
    origin: str  # "KAFKA_HOME", "cache" or "Maven Central": where the jars came from

    @property
    def classpath(self) -> str:
        return str(self.libs / "*")

    @property
    def version(self) -> str:
        for jar in self.libs.glob(f"kafka_{SCALA_VERSION}-*.jar"):
            stem = jar.name.removeprefix(f"kafka_{SCALA_VERSION}-").removesuffix(".jar")
            if stem[:1].isdigit() and "-" not in stem:
                return stem
        return "unknown"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def resolve_distribution(
    kafka_home: str | os.PathLike[str] | None = None, progress: Progress = _stderr
) -> KafkaDistribution:
    """An existing distribution if one is named, else the cached jars, else download them once."""
    home = kafka_home or os.environ.get("KAFKA_HOME")
    if home:
        return _from_kafka_home(Path(home))
    cached = cache_dir()
    if (cached / COMPLETE_MARKER).exists():
        return KafkaDistribution(cached / "libs", "cache")
    return download(cached, progress)


def cache_dir() -> Path:
    return jar_cache.cache_dir("kafka", KAFKA_VERSION)


def _from_kafka_home(home: Path) -> KafkaDistribution:
    libs = home / "libs"
    if not any(libs.glob(f"kafka_{SCALA_VERSION}-*.jar")):
        raise DistributionError(
            f"KAFKA_HOME={home} is not an Apache Kafka distribution: no "
            f"libs/kafka_{SCALA_VERSION}-*.jar there. Unset it to let dgm download Kafka "
            f"{KAFKA_VERSION}, or point it at an extracted kafka_{SCALA_VERSION}-<version> folder."
        )
    return KafkaDistribution(libs, "KAFKA_HOME")


def download(
    target: Path,
    progress: Progress,
    jars: Sequence[LockedJar] | None = None,
    repository: str | None = None,
) -> KafkaDistribution:
    with locked(target):
        if (target / COMPLETE_MARKER).exists():  # another process finished while we waited
            return KafkaDistribution(target / "libs", "cache")
        pinned = kafka_jars() if jars is None else jars
        megabytes = sum(jar.size for jar in pinned) / (1024 * 1024)
        progress(
            f"Fetching Apache Kafka {KAFKA_VERSION} ({len(pinned)} jars, {megabytes:.0f} MB) "
            f"from {repository or repository_url()} into {target} (first run only)..."
        )
        try:
            replace_whole(  # the cache appears whole or not at all
                target,
                KAFKA_VERSION,
                lambda staging: fetch_all(pinned, staging / "libs", progress, repository),
            )
        except DownloadError as error:
            raise DistributionError(f"{error} {NO_BROKER_HINT}") from error
        progress(f"Kafka {KAFKA_VERSION} ready: {len(pinned)} jars in {target / 'libs'}")
        return KafkaDistribution(target / "libs", "Maven Central")
