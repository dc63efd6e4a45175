"""Resolve Apache Kafka's broker: KAFKA_HOME, else its pinned jars (embedded_kafka.kafka_jars:
the user cache, else Maven Central)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dgm.util.errors import UserFacingError
from embedded_kafka.java import NO_BROKER_HINT
from embedded_kafka.kafka_jars import BROKER, KAFKA_VERSION, JarSet
from embedded_kafka.maven_central import DownloadError

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
        return self.known_version or "unknown"

    @property
    def known_version(self) -> str | None:
        """The Kafka version its kafka_2.13 jar names; None if it names none."""
        for jar in self.libs.glob(f"kafka_{SCALA_VERSION}-*.jar"):
            stem = jar.name.removeprefix(f"kafka_{SCALA_VERSION}-").removesuffix(".jar")
            if stem[:1].isdigit() and "-" not in stem:
                return stem
        return None


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def resolve_distribution(
    kafka_home: str | os.PathLike[str] | None = None,
    progress: Progress = _stderr,
    kafka_version: str = KAFKA_VERSION,
) -> KafkaDistribution:
    """An existing distribution if one is named, else the broker's jars pinned for
    `kafka_version`: cached, or downloaded once."""
    home = kafka_home or os.environ.get("KAFKA_HOME")
    if home:
        return _from_kafka_home(Path(home), kafka_version)
    return fetch(JarSet.pinned(BROKER, kafka_version), progress)


def _from_kafka_home(home: Path, kafka_version: str) -> KafkaDistribution:
    libs = home / "libs"
    if not any(libs.glob(f"kafka_{SCALA_VERSION}-*.jar")):
        raise DistributionError(
            f"KAFKA_HOME={home} is not an Apache Kafka distribution: no "
            f"libs/kafka_{SCALA_VERSION}-*.jar there. Unset it to let dgm download Kafka "
            f"{kafka_version}, or point it at an extracted kafka_{SCALA_VERSION}-<version> folder."
        )
    return KafkaDistribution(libs, "KAFKA_HOME")


def fetch(jars: JarSet, progress: Progress, repository: str | None = None) -> KafkaDistribution:
    """The broker's `jars`, from the cache or downloaded once (DistributionError if not)."""
    try:
        fetched = jars.fetch(progress, repository)
    except DownloadError as error:
        raise DistributionError(f"{error} {NO_BROKER_HINT}") from error
    return KafkaDistribution(fetched.libs, "Maven Central" if fetched.downloaded else "cache")
