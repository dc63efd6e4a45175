"""Resolve Apache Kafka's jars: KAFKA_HOME, else the user cache, else Maven Central.

Pinned to one Kafka version so that every test run, CI run and demo measures the same broker.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dgm.broker.java import NO_BROKER_HINT
from dgm.errors import UserFacingError
from dgm.paths import user_cache_dir

KAFKA_VERSION = "4.1.1"
SCALA_VERSION = "2.13"
# Kafka 4 logs through SLF4J 2; without an explicit slf4j-api 2.x, Maven's nearest-wins picks a
# 1.7 API from a transitive dependency and the broker silently logs nothing.
SLF4J_VERSION = "2.0.17"
LOG4J_VERSION = "2.24.3"

BROKER_MAIN = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
COMPLETE_MARKER = ".complete"

Progress = Callable[[str], None]


class DistributionError(UserFacingError):
    pass


@dataclass(frozen=True)
class KafkaDistribution:
    libs: Path
    origin: str  # "KAFKA_HOME", "cache" or "maven": where the jars came from

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
    return _download(cached, progress)


def cache_dir() -> Path:
    return user_cache_dir() / "kafka" / KAFKA_VERSION


def _from_kafka_home(home: Path) -> KafkaDistribution:
    libs = home / "libs"
    if not any(libs.glob(f"kafka_{SCALA_VERSION}-*.jar")):
        raise DistributionError(
            f"KAFKA_HOME={home} is not an Apache Kafka distribution: no "
            f"libs/kafka_{SCALA_VERSION}-*.jar there. Unset it to let dgm download Kafka "
            f"{KAFKA_VERSION}, or point it at an extracted kafka_{SCALA_VERSION}-<version> folder."
        )
    return KafkaDistribution(libs, "KAFKA_HOME")


def runtime_pom() -> str:
    """A POM whose runtime dependencies are a runnable broker plus Kafka's own tools."""
    deps = [
        ("org.slf4j", "slf4j-api", SLF4J_VERSION),
        ("org.apache.kafka", f"kafka_{SCALA_VERSION}", KAFKA_VERSION),
        ("org.apache.kafka", "kafka-tools", KAFKA_VERSION),
        ("org.apache.logging.log4j", "log4j-slf4j2-impl", LOG4J_VERSION),
        ("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION),
    ]
    entries = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in deps
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        f"  <groupId>dgm</groupId><artifactId>kafka-runtime</artifactId>"
        f"<version>{KAFKA_VERSION}</version>\n"
        f"  <dependencies>\n{entries}\n  </dependencies>\n</project>\n"
    )


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Two processes (two test sessions, demo and CI) must not download into one folder."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _download(target: Path, progress: Progress) -> KafkaDistribution:
    with _exclusive(target.with_name(f"{target.name}.lock")):
        if (target / COMPLETE_MARKER).exists():  # another process finished while we waited
            return KafkaDistribution(target / "libs", "cache")
        mvn = shutil.which("mvn")
        if mvn is None:
            raise DistributionError(
                f"Kafka {KAFKA_VERSION} is not cached yet and Maven (`mvn`) is not installed to "
                "fetch it from Maven Central. Install Maven (apt-get install maven), or set "
                f"KAFKA_HOME to an extracted Apache Kafka 4.x distribution. {NO_BROKER_HINT}"
            )
        progress(
            f"Fetching Apache Kafka {KAFKA_VERSION} jars from Maven Central into {target} "
            "(first run only)..."
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
        try:
            (staging / "pom.xml").write_text(runtime_pom())
            _run_maven(mvn, staging, progress)
            if target.exists():
                shutil.rmtree(target)
            (staging / COMPLETE_MARKER).write_text(KAFKA_VERSION)
            os.replace(staging, target)  # the cache appears whole or not at all
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        jars = len(list((target / "libs").glob("*.jar")))
        progress(f"Kafka {KAFKA_VERSION} ready: {jars} jars in {target / 'libs'}")
        return KafkaDistribution(target / "libs", "maven")


def _run_maven(mvn: str, folder: Path, progress: Progress) -> None:
    command = [
        mvn,
        "-B",
        "-f",
        str(folder / "pom.xml"),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={folder / 'libs'}",
        "-DincludeScope=runtime",
    ]
    tail: list[str] = []
    downloaded = 0
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            tail = [*tail[-30:], line.rstrip()]
            if line.startswith("Downloaded from"):
                downloaded += 1
                if downloaded % 25 == 0:
                    progress(f"  ... {downloaded} files downloaded")
    if process.returncode != 0:
        raise DistributionError(
            "Maven could not resolve the Kafka jars (is Maven Central reachable?). "
            "Last lines:\n" + "\n".join(tail)
        )
