"""The Streams application's classpath: Kafka Streams' pinned jars and its compiled class.

The jars are embedded_kafka.kafka_jars' `kafka-streams` set. The class javac compiled from
StreamsPipeline.java lives in the user cache (DGM_CACHE_DIR, else ~/.cache/dgm) under
streams-pipeline/<Kafka version>/classes-<hash of the source>/, so an edited source is
compiled afresh; it appears whole (staged, then renamed) or not at all.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from dgm.util.errors import UserFacingError
from embedded_kafka.jar_cache import COMPLETE_MARKER, cache_dir, locked, replace_whole
from embedded_kafka.java import find_java
from embedded_kafka.kafka_jars import STREAMS, JarSet

SOURCE_FILE = "StreamsPipeline.java"
LOG_CONFIG = "log4j2.properties"
MAIN_CLASS = "StreamsPipeline"
CLASSES = "streams-pipeline"  # the compiled application's folder in the user cache

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


def resource(name: str) -> Path:
    """A file shipped beside this module: the application's source, its log configuration."""
    return Path(str(resources.files("lab.streams").joinpath(name)))


def resolve_classpath(progress: Progress) -> StreamsClasspath:
    """The jars (downloaded once) and the compiled application (compiled once per source)."""
    jars = JarSet.pinned(STREAMS)
    libs = jars.fetch(progress).libs
    source = resource(SOURCE_FILE).read_bytes()
    with locked(cache_dir(CLASSES, jars.version)) as root:
        classes = root / f"classes-{hashlib.sha256(source).hexdigest()[:16]}"
        if not (classes / COMPLETE_MARKER).exists():
            _compile(source, libs, classes, progress, jars.title)
    return StreamsClasspath(libs, classes, resource(LOG_CONFIG))


def _compile(source: bytes, libs: Path, classes: Path, progress: Progress, against: str) -> None:
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

    replace_whole(classes, against, compile_into)
