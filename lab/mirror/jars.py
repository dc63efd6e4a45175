"""MirrorMaker 2's classpath: the broker's jars plus the `connect-mirror` set's, both of
MIRROR_VERSION (embedded_kafka.kafka_jars says why), each downloaded once."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from embedded_kafka.distribution import resolve_distribution
from embedded_kafka.kafka_jars import MIRROR, MIRROR_VERSION, JarSet

LOG_CONFIG = "log4j2.properties"
MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class MirrorClasspath:
    libs: Path  # connect-mirror and connect-mirror-client
    broker_libs: Path  # the broker's distribution: Connect's runtime and the clients
    log_config: Path

    @property
    def classpath(self) -> str:
        return f"{self.libs / '*'}{os.pathsep}{self.broker_libs / '*'}"


def resolve_classpath(progress: Progress) -> MirrorClasspath:
    """The broker's jars and MirrorMaker 2's own, each downloaded once."""
    broker = resolve_distribution(progress=progress, kafka_version=MIRROR_VERSION)
    libs = JarSet.pinned(MIRROR, MIRROR_VERSION).fetch(progress).libs
    log_config = Path(str(resources.files("lab.mirror").joinpath(LOG_CONFIG)))
    return MirrorClasspath(libs, broker.libs, log_config)
