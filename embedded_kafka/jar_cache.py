"""A folder of pinned jars in the user cache: fetched once, whole or not at all, one writer.

Shared by the broker's distribution and the lab's Java applications (Kafka Streams,
MirrorMaker 2): each names its lock file; the jars are checked against their SHA-256 by
`maven_central.fetch_all`, staged beside the target and renamed into place with a marker.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from embedded_kafka.maven_central import LockedJar, fetch_all

COMPLETE_MARKER = ".complete"

Progress = Callable[[str], None]


@contextmanager
def exclusive(lock_path: Path) -> Iterator[None]:
    """Two processes (two test sessions, demo and CI) must not write into one folder at once."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def cached_jars(libs: Path, jars: Sequence[LockedJar], what: str, progress: Progress) -> Path:
    """`libs` holding exactly `jars`, downloaded and verified if not there yet. The caller
    holds `exclusive` on a lock beside it. Raises maven_central.DownloadError."""
    if (libs / COMPLETE_MARKER).exists():
        return libs
    progress(f"Fetching {what} ({len(jars)} jars) into {libs}...")
    libs.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=libs.parent))
    try:
        fetch_all(jars, staging, progress)
        (staging / COMPLETE_MARKER).write_text(what)
        shutil.rmtree(libs, ignore_errors=True)
        os.replace(staging, libs)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return libs
