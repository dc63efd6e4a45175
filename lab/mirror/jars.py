"""MirrorMaker 2's classpath: the broker's pinned jars plus mirror-jars.lock's, from the cache.

The extra jars live in the user cache (DGM_CACHE_DIR, else ~/.cache/dgm) under
connect-mirror/<version>/libs, each checked against its SHA-256 (embedded_kafka.jar_cache).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from dgm.errors import UserFacingError
from dgm.paths import user_cache_dir
from embedded_kafka.distribution import resolve_distribution
from embedded_kafka.jar_cache import cached_jars, exclusive
from embedded_kafka.maven_central import DownloadError, LockedJar, parse_lock

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


def mirror_jars() -> tuple[LockedJar, ...]:
    return parse_lock(_resource(LOCK_FILE).read_text())


def cache_dir() -> Path:
    return user_cache_dir() / "connect-mirror" / MIRROR_VERSION


def resolve_classpath(progress: Progress) -> MirrorClasspath:
    """The broker's jars and MirrorMaker 2's own, each downloaded once."""
    broker = resolve_distribution(progress=progress)
    root = cache_dir()
    with exclusive(root.with_name(f"{root.name}.lock")):
        try:
            libs = cached_jars(
                root / "libs", mirror_jars(), f"connect-mirror {MIRROR_VERSION}", progress
            )
        except DownloadError as error:
            raise MirrorBuildError(f"{error} (jars of lab/mirror/{LOCK_FILE})") from error
    return MirrorClasspath(libs, broker.libs, _resource(LOG_CONFIG))


def _resource(name: str) -> Path:
    return Path(str(resources.files("lab.mirror").joinpath(name)))
