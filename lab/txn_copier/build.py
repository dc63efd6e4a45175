"""TxnCopier's classpath: the pinned jars of one Kafka version (embedded_kafka.kafka_jars'
broker set, which holds that version's kafka-clients) and the class javac compiled from
TxnCopier.java against them.

The class lives in the user cache (DGM_CACHE_DIR, else ~/.cache/dgm) under
txn-copier/<Kafka version>/classes-<hash of the source>/, so an edited source is compiled
afresh; it appears whole (staged, then renamed) or not at all.
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
from embedded_kafka.kafka_jars import BROKER, JarSet
from lab.java_compile import compile_source

SOURCE_FILE = "TxnCopier.java"
MAIN_CLASS = "TxnCopier"
CLASSES = "txn-copier"  # the compiled copier's folder in the user cache

Progress = Callable[[str], None]


class CopierBuildError(UserFacingError):
    pass


@dataclass(frozen=True)
class CopierClasspath:
    version: str  # the Kafka version whose clients the copier runs with
    libs: Path
    classes: Path

    @property
    def classpath(self) -> str:
        return f"{self.libs / '*'}{os.pathsep}{self.classes}"


def resolve_classpath(version: str, progress: Progress) -> CopierClasspath:
    """The version's jars (downloaded once) and the copier compiled against them (once per
    source and version)."""
    jars = JarSet.pinned(BROKER, version)
    libs = jars.fetch(progress).libs
    source = Path(str(resources.files("lab.txn_copier").joinpath(SOURCE_FILE))).read_bytes()
    with locked(cache_dir(CLASSES, version)) as root:
        classes = root / f"classes-{hashlib.sha256(source).hexdigest()[:16]}"
        if not (classes / COMPLETE_MARKER).exists():
            compile_source(SOURCE_FILE, source, libs, classes, version, progress, CopierBuildError)
    return CopierClasspath(version, libs, classes)
