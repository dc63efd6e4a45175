"""The Streams application's classpath: pinned jars from Maven Central and its compiled class.

Both live in the user cache (DGM_CACHE_DIR, else ~/.cache/dgm) under kafka-streams/<version>:
`libs/` holds the jars of streams-jars.lock, each checked against its SHA-256, and
`classes-<hash of the source>/` the class javac compiled from StreamsPipeline.java, so an
edited source is compiled afresh. Each appears whole (staged, then renamed) or not at all.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dgm.errors import UserFacingError
from embedded_kafka.jar_cache import COMPLETE_MARKER, PinnedJars, locked, replace_whole
from embedded_kafka.java import find_java
from embedded_kafka.maven_central import LockedJar

STREAMS_VERSION = "4.1.1"
LOCK_FILE = "streams-jars.lock"
SOURCE_FILE = "StreamsPipeline.java"
LOG_CONFIG = "log4j2.properties"
MAIN_CLASS = "StreamsPipeline"

Progress = Callable[[str], None]


class StreamsBuildError(UserFacingError):
    pass


@dataclass(frozen=True)
class StreamsClasspath:
    libs: Path
    classes: Path
    log_config: Path

    @property
    def classpath(self) -> str:
        return f"{self.libs / '*'}{os.pathsep}{self.classes}"


PINNED = PinnedJars(
    "lab.streams", LOCK_FILE, "kafka-streams", STREAMS_VERSION, f"Kafka Streams {STREAMS_VERSION}"
)


def streams_jars() -> tuple[LockedJar, ...]:
    return PINNED.jars()


def cache_dir() -> Path:
    return PINNED.cache_dir()


def resolve_classpath(progress: Progress) -> StreamsClasspath:
    """The jars (downloaded once) and the compiled application (compiled once per source)."""
    with locked(cache_dir()) as root:
        root.mkdir(parents=True, exist_ok=True)
        libs = PINNED.libs(root, progress, StreamsBuildError)
        source = PINNED.resource(SOURCE_FILE).read_bytes()
        classes = root / f"classes-{hashlib.sha256(source).hexdigest()[:16]}"
        if not (classes / COMPLETE_MARKER).exists():
            _compile(source, libs, classes, progress)
    return StreamsClasspath(libs, classes, PINNED.resource(LOG_CONFIG))


def _compile(source: bytes, libs: Path, classes: Path, progress: Progress) -> None:
    javac = find_java().with_name("javac")
    if not javac.exists():
        found = shutil.which("javac")
        if found is None:
            raise StreamsBuildError(
                f"compiling {SOURCE_FILE} needs javac (a JDK 17+, not only a JRE): none next "
                f"to {find_java()} nor on PATH"
            )
        javac = Path(found)
    progress(f"Compiling {SOURCE_FILE} into {classes}...")

    def compile_into(staging: Path) -> None:
        (staging / SOURCE_FILE).write_bytes(source)
        result = subprocess.run(
            [str(javac), "-J-Xmx256m", "-d", str(staging), "-cp", str(libs / "*"),
             str(staging / SOURCE_FILE)],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise StreamsBuildError(f"javac failed on {SOURCE_FILE}:\n{result.stderr.strip()}")
        (staging / SOURCE_FILE).unlink()

    replace_whole(classes, STREAMS_VERSION, compile_into)
