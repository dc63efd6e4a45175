"""The Streams application's classpath: Kafka Streams' pinned jars and its compiled class.

The jars are embedded_kafka.kafka_jars' `kafka-streams` set. The class javac compiled from
StreamsPipeline.java lives in the user cache (DGM_CACHE_DIR, else ~/.cache/dgm) under
streams-pipeline/<Kafka version>/classes-<hash of the source>/, so an edited source is
compiled afresh; it appears whole (staged, then renamed) or not at all.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from dgm.util.errors import UserFacingError
from embedded_kafka.jar_cache import COMPLETE_MARKER, cache_dir, locked
from embedded_kafka.kafka_jars import STREAMS, JarSet
from lab.java_compile import compile_source

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
            compile_source(
                SOURCE_FILE, source, libs, classes, jars.title, progress, StreamsBuildError
            )
    return StreamsClasspath(libs, classes, resource(LOG_CONFIG))
