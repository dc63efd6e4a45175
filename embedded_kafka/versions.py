"""Which Apache Kafka versions the embedded broker runs, and in which mode (KRaft, ZooKeeper).

The versions are those operators run (docs/compatibility.md): each one's broker jars are pinned
in `locks/kafka-<version>.lock`. A line (`3.9`) names its pinned patch (`3.9.2`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from dgm.util.errors import UserFacingError
from embedded_kafka.kafka_jars import KAFKA_VERSION

KRAFT = "kraft"
ZOOKEEPER = "zookeeper"
MODES = (KRAFT, ZOOKEEPER)

# Each supported version, and why an operator may be running it.
SUPPORTED: dict[str, str] = {
    "3.6.2": "the oldest line AWS MSK still offers (3.6.0 there, ZooKeeper mode only)",
    "3.9.2": "the last line with ZooKeeper, in both modes",
    "4.0.2": "the first line without ZooKeeper and without the oldest protocol versions",
    "4.1.1": "the first line with share groups (a preview); the lab's MirrorMaker 2 runs on it",
    KAFKA_VERSION: "dgm's default: the newest stable release",
}

# The tests' fixtures read these (from_environment), and nothing else does.
VERSION_VARIABLE = "DGM_KAFKA_VERSION"
MODE_VARIABLE = "DGM_KAFKA_MODE"


class VersionError(UserFacingError):
    pass


@dataclass(frozen=True)
class KafkaRelease:
    """A Kafka version and the mode its cluster runs in; ZooKeeper mode is refused for 4.x."""

    version: str = KAFKA_VERSION
    mode: str = KRAFT

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise VersionError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        numbers = version_numbers(self.version)
        if self.mode == ZOOKEEPER and numbers[0] >= 4:
            raise VersionError(
                f"Kafka {self.version} has no ZooKeeper mode: ZooKeeper was removed in 4.0. "
                f"Use --mode kraft, or a 3.x version ({', '.join(zookeeper_versions())})"
            )
        if numbers[0] < 3:
            raise VersionError(f"Kafka {self.version} is older than any dgm runs (3.x, 4.x)")

    @property
    def major(self) -> int:
        return version_numbers(self.version)[0]

    @property
    def zookeeper(self) -> bool:
        return self.mode == ZOOKEEPER

    @property
    def log4j2(self) -> bool:
        """Kafka 4 logs through log4j 2; Kafka 3 through reload4j (log4j 1's configuration)."""
        return self.major >= 4

    @property
    def has_share_groups(self) -> bool:
        """Whether the broker knows the share coordinator's settings (KIP-932, from 4.0)."""
        return self.major >= 4

    @property
    def label(self) -> str:
        return f"Kafka {self.version} ({'ZooKeeper mode' if self.zookeeper else 'KRaft'})"

    def with_version(self, version: str) -> KafkaRelease:
        return KafkaRelease(version, self.mode)


def version_numbers(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        raise VersionError(f"not a Kafka version: {version!r} (e.g. {KAFKA_VERSION})") from None


def supported_version(requested: str | None) -> str:
    """The pinned version `requested` names (a version, or a line like `3.9`); the default
    when None; VersionError listing the supported ones otherwise."""
    if not requested:
        return KAFKA_VERSION
    if requested in SUPPORTED:
        return requested
    line = [v for v in SUPPORTED if v.startswith(f"{requested}.") and requested.count(".") == 1]
    if len(line) == 1:
        return line[0]
    raise VersionError(
        f"dgm runs no Kafka {requested}; supported: {', '.join(SUPPORTED)} "
        f"(default {KAFKA_VERSION}; docs/compatibility.md)"
    )


def release(version: str | None = None, mode: str | None = None) -> KafkaRelease:
    """A supported release: `version` (default dgm's) in `mode` (default KRaft)."""
    return KafkaRelease(supported_version(version), mode or KRAFT)


def from_environment() -> KafkaRelease:
    """The release the tests' embedded clusters run: DGM_KAFKA_VERSION and DGM_KAFKA_MODE,
    else dgm's default."""
    return release(os.environ.get(VERSION_VARIABLE), os.environ.get(MODE_VARIABLE))


def zookeeper_versions() -> list[str]:
    return [v for v in SUPPORTED if version_numbers(v)[0] < 4]


def matrix() -> list[KafkaRelease]:
    """Every supported version in every mode it has: the compatibility table's rows."""
    return [
        KafkaRelease(version, mode)
        for version in SUPPORTED
        for mode in MODES
        if mode == KRAFT or version_numbers(version)[0] < 4
    ]
