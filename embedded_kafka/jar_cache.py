"""A folder in the user cache: filled once, whole or not at all, by one writer at a time.

What embedded_kafka.kafka_jars keeps its pinned jars in, and the lab's Kafka Streams
application its compiled class: each is staged beside its target and renamed into place with
a marker.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dgm.util.paths import user_cache_dir

COMPLETE_MARKER = ".complete"


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


def cache_dir(name: str, version: str) -> Path:
    """`<user cache>/<name>/<version>`: where one pinned version of something is kept."""
    return user_cache_dir() / name / version


@contextmanager
def locked(root: Path) -> Iterator[Path]:
    """`exclusive` on `<root>.lock`, the lock file beside the folder `root`."""
    with exclusive(root.with_name(f"{root.name}.lock")):
        yield root


def replace_whole(target: Path, marker: str, fill: Callable[[Path], None]) -> None:
    """`fill` a staging folder beside `target`, mark it complete (its marker file says
    `marker`) and rename it into place: `target` appears whole or not at all."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        fill(staging)
        (staging / COMPLETE_MARKER).write_text(marker)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
