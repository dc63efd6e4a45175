"""MirrorMaker 2's classpath: the broker's pinned jars plus mirror-jars.lock's, from the cache.

The extra jars live in the user cache (DGM_CACHE_DIR, else ~/.cache/dgm) under
connect-mirror/<version>/libs, each checked against its SHA-256 (embedded_kafka.jar_cache).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dgm.errors import UserFacingError
from embedded_kafka.distribution import resolve_distribution
from embedded_kafka.jar_cache import PinnedJars, locked
from embedded_kafka.maven_central import LockedJar

MIRROR_VERSION = "4.1.1"
LOCK_FILE = "mirror-jars.lock"
LOG_CONFIG = "log4j2.properties"
MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"

Progress = Callable[[str], None]


class MirrorBuildError(UserFacingError):
    pass


@dataclass(frozen=True)
class MirrorClasspath:
    libs: Path  # connect-mirror and connect-mirror-client
    broker_libs: Path  # the broker's distribution: Connect's runtime and the clients
    log_config: Path

    @property
    def classpath(self) -> str:
        return f"{self.libs / '*'}{os.pathsep}{self.broker_libs / '*'}"


PINNED = PinnedJars(
    "lab.mirror", LOCK_FILE, "connect-mirror", MIRROR_VERSION, f"connect-mirror {MIRROR_VERSION}"
)


def mirror_jars() -> tuple[LockedJar, ...]:
    return PINNED.jars()


def cache_dir() -> Path:
    return PINNED.cache_dir()


def resolve_classpath(progress: Progress) -> MirrorClasspath:
    """The broker's jars and MirrorMaker 2's own, each downloaded once."""
    broker = resolve_distribution(progress=progress)
    with locked(cache_dir()) as root:
        libs = PINNED.libs(root, progress, MirrorBuildError)
    return MirrorClasspath(libs, broker.libs, PINNED.resource(LOG_CONFIG))
