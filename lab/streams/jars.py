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
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from dgm.errors import UserFacingError
from dgm.paths import user_cache_dir
from embedded_kafka.jar_cache import COMPLETE_MARKER, cached_jars, exclusive
from embedded_kafka.java import find_java
from embedded_kafka.maven_central import DownloadError, LockedJar, parse_lock

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


def streams_jars() -> tuple[LockedJar, ...]:
    return parse_lock(_resource(LOCK_FILE).read_text())


def cache_dir() -> Path:
    return user_cache_dir() / "kafka-streams" / STREAMS_VERSION


def resolve_classpath(progress: Progress) -> StreamsClasspath:
    """The jars (downloaded once) and the compiled application (compiled once per source)."""
    root = cache_dir()
    with exclusive(root.with_name(f"{root.name}.lock")):
        root.mkdir(parents=True, exist_ok=True)
        libs = _jars(root / "libs", progress)
        source = _resource(SOURCE_FILE).read_bytes()
        classes = root / f"classes-{hashlib.sha256(source).hexdigest()[:16]}"
        if not (classes / COMPLETE_MARKER).exists():
            _compile(source, libs, classes, progress)
    return StreamsClasspath(libs, classes, _resource(LOG_CONFIG))


def _resource(name: str) -> Path:
    return Path(str(resources.files("lab.streams").joinpath(name)))


def _jars(libs: Path, progress: Progress) -> Path:
    try:
        return cached_jars(libs, streams_jars(), f"Kafka Streams {STREAMS_VERSION}", progress)
    except DownloadError as error:
        raise StreamsBuildError(f"{error} (jars of lab/streams/{LOCK_FILE})") from error


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
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=classes.parent))
    try:
        (staging / SOURCE_FILE).write_bytes(source)
        result = subprocess.run(
            [str(javac), "-J-Xmx256m", "-d", str(staging), "-cp", str(libs / "*"),
             str(staging / SOURCE_FILE)],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise StreamsBuildError(f"javac failed on {SOURCE_FILE}:\n{result.stderr.strip()}")
        (staging / SOURCE_FILE).unlink()
        (staging / COMPLETE_MARKER).write_text(STREAMS_VERSION)
        shutil.rmtree(classes, ignore_errors=True)
        os.replace(staging, classes)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
